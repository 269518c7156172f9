#include "gateway/tools/ctl.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <ostream>
#include <string_view>
#include <utility>

#include "gateway/tools/ctl_client.h"
#include "gateway/tools/ctl_print.h"

namespace tollgate::gateway {
namespace {

namespace json = boost::json;
using ctl::Seconds;
using ctl::Text;

constexpr std::string_view kDefaultAdmin = "http://127.0.0.1:9090";
constexpr std::string_view kDefaultTokenEnv = "TOLLGATE_ADMIN_TOKEN";

std::string Encode(std::string_view text) {
  return boost::urls::encode(text, boost::urls::unreserved_chars);
}


// Bodies sent one after the other: `block --ips-from`'s blocks, as arrays
// within the admin API's body limit; `lines`, each block's line in the file.
struct Batch {
  std::string body;
  std::vector<std::size_t> lines;
};

// What one command sends, once its options are read: `body` once, or each
// of `batches` in turn.
struct Request {
  std::string method = "GET";
  std::string target;
  std::string body;
  std::string file;  // block --ips-from
  std::vector<Batch> batches;
};

// The admin API reads bodies of at most 64 KiB: a batch stays below.
constexpr std::size_t kBatchBytes = 60'000;

// block --ips-from FILE: one address or network a line; blank lines and
// what follows '#' are skipped. False (with `problem` set) when the file
// cannot be read or holds none.
bool IpBatches(const std::string& file, const json::object& common, std::vector<Batch>& batches,
               std::string& problem) {
  std::ifstream in(file);
  if (!in) {
    problem = "--ips-from: cannot read " + file + ": " + std::strerror(errno);
    return false;
  }
  std::string line;
  std::size_t number = 0;
  json::array blocks;
  Batch batch;
  std::size_t bytes = 2;
  const auto flush = [&] {
    if (blocks.empty()) return;
    batch.body = json::serialize(blocks);
    batches.push_back(std::move(batch));
    batch = {};
    blocks.clear();
    bytes = 2;
  };
  while (std::getline(in, line)) {
    ++number;
    const std::size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    const std::size_t from = line.find_first_not_of(" \t\r");
    if (from == std::string::npos) continue;
    const std::size_t to = line.find_last_not_of(" \t\r");
    json::object block = common;
    block["ip"] = line.substr(from, to - from + 1);
    const std::size_t size = json::serialize(block).size() + 1;
    if (bytes + size > kBatchBytes) flush();
    bytes += size;
    blocks.emplace_back(std::move(block));
    batch.lines.push_back(number);
  }
  flush();
  if (batches.empty()) {
    problem = "--ips-from: " + file + " names no address";
    return false;
  }
  return true;
}

// The options of a command: `--name value` pairs.
class Options {
 public:
  // False (with `problem` set) for a stray word or an option without a value.
  bool Read(const std::vector<std::string>& args, std::size_t from, std::string& problem) {
    for (std::size_t i = from; i < args.size(); ++i) {
      if (!args[i].starts_with("--") || i + 1 >= args.size()) {
        problem = args[i].starts_with("--") ? args[i] + " needs a value"
                                            : "unexpected \"" + args[i] + "\"";
        return false;
      }
      values_.emplace_back(args[i].substr(2), args[i + 1]);
      ++i;
    }
    return true;
  }
  std::optional<std::string> Take(std::string_view name) {
    for (auto it = values_.begin(); it != values_.end(); ++it) {
      if (it->first == name) {
        std::string v = std::move(it->second);
        values_.erase(it);
        return v;
      }
    }
    return std::nullopt;
  }
  // The first option nobody took, if any.
  std::optional<std::string> Left() const {
    if (values_.empty()) return std::nullopt;
    return "--" + values_.front().first;
  }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

// --header's NAME=VALUE; nullopt (with `problem` set) for anything else.
std::optional<std::pair<std::string, std::string>> SplitHeader(const std::string& option,
                                                               std::string& problem) {
  const std::size_t eq = option.find('=');
  if (eq == std::string::npos || eq == 0) {
    problem = "--header takes NAME=VALUE";
    return std::nullopt;
  }
  return std::pair(option.substr(0, eq), option.substr(eq + 1));
}

// The key options' parts, as the admin API names them ("user",
// "header:NAME"), in the order the API reads them.
std::optional<std::vector<std::pair<std::string, std::string>>> KeyParts(Options& options,
                                                                         std::string& problem) {
  std::vector<std::pair<std::string, std::string>> parts;
  for (const std::string_view part : {"ip", "user", "role", "route", "descriptor"}) {
    if (auto v = options.Take(part)) parts.emplace_back(part, std::move(*v));
  }
  while (auto option = options.Take("header")) {
    const auto header = SplitHeader(*option, problem);
    if (!header) return std::nullopt;
    parts.emplace_back("header:" + header->first, header->second);
  }
  return parts;
}

// "?rule=NAME&<part>=<value>..." from --rule and the key options.
std::optional<std::string> KeyQuery(Options& options, std::string& problem) {
  const std::optional<std::string> rule = options.Take("rule");
  if (!rule) {
    problem = "--rule is required";
    return std::nullopt;
  }
  const auto parts = KeyParts(options, problem);
  if (!parts) return std::nullopt;
  std::string query = "?rule=" + Encode(*rule);
  for (const auto& [name, value] : *parts) query += "&" + Encode(name) + "=" + Encode(value);
  return query;
}

// A whole number option such as --limit 1000; nullopt (with `problem` set)
// for anything else.
std::optional<std::int64_t> Number(std::string_view option, const std::string& text,
                                   std::string& problem) {
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    problem = "--" + std::string(option) + " takes a number";
    return std::nullopt;
  }
  return n;
}

// The body of `override set`: --rule, the key options, --limit/--window
// pairs (and --burst, matched to the limits in order) and --ttl.
std::optional<std::string> OverrideBody(Options& options, std::string& problem) {
  json::object body;
  if (auto rule = options.Take("rule")) {
    body["rule"] = *rule;
  } else {
    problem = "--rule is required";
    return std::nullopt;
  }
  const auto parts = KeyParts(options, problem);
  if (!parts) return std::nullopt;
  json::object key;
  for (const auto& [name, value] : *parts) key[name] = value;
  body["key"] = std::move(key);
  json::array limits;
  while (auto limit = options.Take("limit")) {
    const std::optional<std::int64_t> n = Number("limit", *limit, problem);
    if (!n) return std::nullopt;
    const std::optional<std::string> window = options.Take("window");
    if (!window) {
      problem = "every --limit needs its --window";
      return std::nullopt;
    }
    json::object one{{"limit", *n}, {"window", *window}};
    if (auto burst = options.Take("burst")) {
      const std::optional<std::int64_t> b = Number("burst", *burst, problem);
      if (!b) return std::nullopt;
      one["burst"] = *b;
    }
    limits.emplace_back(std::move(one));
  }
  if (limits.empty()) {
    problem = "--limit N --window DURATION is required";
    return std::nullopt;
  }
  body["limits"] = std::move(limits);
  if (auto ttl = options.Take("ttl")) {
    body["ttl"] = *ttl;
  } else {
    problem = "--ttl is required";
    return std::nullopt;
  }
  return json::serialize(body);
}

std::optional<Request> Build(const std::string& command, Options& options, std::string& problem) {
  Request r;
  if (command == "rules") {
    r.target = "/api/v1/rules";
  } else if (command == "keys" || command == "reset") {
    const std::optional<std::string> query = KeyQuery(options, problem);
    if (!query) return std::nullopt;
    r.target = "/api/v1/keys" + *query;
    if (command == "reset") r.method = "DELETE";
  } else if (command == "block") {
    json::object body;
    const std::optional<std::string> file = options.Take("ips-from");
    if (auto v = options.Take("ip")) body["ip"] = *v;
    if (auto v = options.Take("user")) body["user"] = *v;
    if (auto option = options.Take("header")) {
      const auto header = SplitHeader(*option, problem);
      if (!header) return std::nullopt;
      body["header"] = json::object{{header->first, header->second}};
    }
    if (auto v = options.Take("ttl")) body["ttl"] = *v;
    if (auto v = options.Take("status")) {
      char* end = nullptr;
      const long status = std::strtol(v->c_str(), &end, 10);
      if (v->empty() || *end != '\0') {
        problem = "--status takes a number";
        return std::nullopt;
      }
      body["status"] = status;
    }
    r.method = "PUT";
    r.target = "/api/v1/blocks";
    if (file) {
      if (body.contains("ip") || body.contains("user") || body.contains("header")) {
        problem = "--ips-from takes the place of --ip, --user and --header";
        return std::nullopt;
      }
      r.file = *file;
      if (!IpBatches(*file, body, r.batches, problem)) return std::nullopt;
    } else {
      r.body = json::serialize(body);
    }
  } else if (command == "unblock") {
    const std::optional<std::string> id = options.Take("id");
    if (!id) {
      problem = "--id is required";
      return std::nullopt;
    }
    r.method = "DELETE";
    r.target = "/api/v1/blocks?id=" + Encode(*id);
  } else if (command == "blocks") {
    r.target = "/api/v1/blocks";
  } else if (command == "override set") {
    const std::optional<std::string> body = OverrideBody(options, problem);
    if (!body) return std::nullopt;
    r.method = "PUT";
    r.target = "/api/v1/overrides";
    r.body = *body;
  } else if (command == "override list") {
    r.target = "/api/v1/overrides";
    if (auto rule = options.Take("rule")) r.target += "?rule=" + Encode(*rule);
  } else if (command == "override remove") {
    const std::optional<std::string> query = KeyQuery(options, problem);
    if (!query) return std::nullopt;
    r.method = "DELETE";
    r.target = "/api/v1/overrides" + *query;
  } else {
    problem = "unknown command \"" + command + "\"";
    return std::nullopt;
  }
  if (auto left = options.Left()) {
    problem = "unknown option " + *left + " for " + command;
    return std::nullopt;
  }
  return r;
}


// The JSON object of a successful answer; nullopt, with the server's error
// printed to `err`, otherwise. A refused batch of `file` names the line of
// the block the error is about.
std::optional<json::object> Answered(const AdminReply& reply, const Batch* batch,
                                     const std::string& file, std::ostream& err) {
  if (reply.status == 0) {
    err << "tollgate ctl: " << reply.error << "\n";
    return std::nullopt;
  }
  boost::system::error_code ec;
  json::value doc = json::parse(reply.body, ec);
  if (ec || !doc.is_object()) {
    err << "tollgate ctl: " << reply.status << " with a body that is not JSON\n";
    return std::nullopt;
  }
  json::object& object = doc.as_object();
  if (reply.status < 300) return std::move(object);
  std::string message = object.contains("message") ? Text(object.at("message")) : "";
  // "[3].ip: ..." of a batch: "FILE:LINE: ip: ...".
  if (batch != nullptr && message.starts_with("[")) {
    const std::size_t index = std::strtoul(message.c_str() + 1, nullptr, 10);
    const std::size_t close = message.find(']');
    if (index < batch->lines.size() && close != std::string::npos) {
      std::size_t rest = close + 1;
      if (rest < message.size() && message[rest] == '.') ++rest;
      message = file + ":" + std::to_string(batch->lines[index]) + ": " + message.substr(rest);
    }
  }
  err << "tollgate ctl: " << reply.status << " "
      << (object.contains("error") ? Text(object.at("error")) : "error") << ": " << message
      << "\n";
  if (object.contains("rules")) err << "rules: " << Text(object.at("rules")) << "\n";
  return std::nullopt;
}

// Sends `request`'s batches in turn and stops at the first one refused (the
// ones before it stay set: each batch is one change).
int SendBatches(const Request& request, AdminCall call, bool as_json, std::ostream& out,
                std::ostream& err) {
  std::size_t total = 0;
  for (const Batch& batch : request.batches) total += batch.lines.size();
  json::array all;
  for (const Batch& batch : request.batches) {
    call.body = batch.body;
    std::optional<json::object> doc = Answered(CallAdmin(call), &batch, request.file, err);
    if (!doc) {
      if (!all.empty()) {
        err << "tollgate ctl: " << all.size() << " of the " << total
            << " blocks before that one were set\n";
      }
      return 1;
    }
    for (json::value& b : doc->at("blocks").as_array()) all.emplace_back(std::move(b));
  }
  if (as_json) {
    out << json::serialize(json::object{{"blocks", std::move(all)}});
    return 0;
  }
  const json::object& first = all.front().as_object();
  out << "blocked " << all.size() << " addresses and networks from " << request.file << " for "
      << Seconds(first.at("ttl_ms")) << " s (status " << Text(first.at("status")) << ")\n";
  return 0;
}

}  // namespace

int RunCtl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string admin(kDefaultAdmin);
  std::string token_env(kDefaultTokenEnv);
  bool as_json = false;
  std::size_t i = 0;
  for (; i < args.size() && args[i].starts_with("--"); ++i) {
    if (args[i] == "--json") {
      as_json = true;
    } else if ((args[i] == "--admin" || args[i] == "--token-env") && i + 1 < args.size()) {
      (args[i] == "--admin" ? admin : token_env) = args[i + 1];
      ++i;
    } else {
      err << "tollgate ctl: unknown option " << args[i] << "; see 'tollgate ctl --help'\n";
      return 2;
    }
  }
  if (i == args.size()) {
    err << "tollgate ctl: a command is needed; see 'tollgate ctl --help'\n";
    return 2;
  }
  std::string command = args[i];
  // `override` takes a verb: set, list or remove.
  if (command == "override" && i + 1 < args.size() && !args[i + 1].starts_with("--")) {
    command += " " + args[++i];
  }
  Options options;
  std::string problem;
  std::optional<Request> request;
  if (options.Read(args, i + 1, problem)) request = Build(command, options, problem);
  auto url = boost::urls::parse_uri(admin);
  if (request && (!url || url->scheme() != "http" || url->host().empty())) {
    problem = "--admin must be an http:// URL such as " + std::string(kDefaultAdmin);
    request.reset();
  }
  if (!request) {
    err << "tollgate ctl: " << problem << "; see 'tollgate ctl --help'\n";
    return 2;
  }
  AdminCall call;
  call.host = url->host_address();
  call.port = url->has_port() ? url->port_number() : 80;
  call.method = request->method;
  call.target = request->target;
  call.body = request->body;
  if (const char* token = std::getenv(token_env.c_str())) call.token = token;
  if (!request->batches.empty()) {
    return SendBatches(*request, std::move(call), as_json, out, err);
  }
  const AdminReply reply = CallAdmin(call);
  const std::optional<json::object> doc = Answered(reply, nullptr, "", err);
  if (!doc) return 1;
  if (as_json) {
    out << json::serialize(*doc);
  } else {
    ctl::PrintAnswer(command, *doc, out);
  }
  return 0;
}

}  // namespace tollgate::gateway
