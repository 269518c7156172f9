#include "store/redis/protocol.h"

#include <fmt/format.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace tollgate::store {
namespace redis {
namespace {

bool SafeKeyByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '~' || c == '/' || c == '@' || c == '+' || c == '=' || c == '-';
}

// Space-separated arguments as a shell reads them ("" for an empty one).
struct ShellWriter {
  std::string out;
  void Arg(std::string_view s) {
    if (!out.empty()) out += ' ';
    out += s.empty() ? std::string_view("\"\"") : s;
  }
  void Arg(std::int64_t v) { Arg(std::string_view(std::to_string(v))); }
};

// One decision of a single token_bucket window's reply
// (store/lua/token_bucket_fused.lua): "1 remaining reset_ms" or
// "0 remaining reset_ms retry_after_ms".
bool ReadFusedDecision(std::string_view text, algorithms::Decision& d) {
  std::int64_t v[4] = {0, 0, 0, 0};
  const char* p = text.data();
  const char* end = p + text.size();
  int n = 0;
  for (; n < 4 && p < end; ++n) {
    auto [next, ec] = std::from_chars(p, end, v[n]);
    if (ec != std::errc() || (next != end && *next != ' ')) return false;
    p = next == end ? end : next + 1;
  }
  const int fields = v[0] == 1 ? 3 : 4;
  if (p != end || text.empty() || text.back() == ' ' || v[0] < 0 || v[0] > 1 || n != fields) {
    return false;
  }
  d.allowed = v[0] == 1;
  d.remaining = v[1];
  d.reset_ms = v[2];
  d.retry_after_ms = v[3];
  d.delay_ms = 0;
  d.window = 0;
  d.window_reset_ms = v[2];
  return true;
}

}  // namespace

void RespWriter::Arg(std::string_view s) {
  Header('$', s.size());
  out_.append(s);
  out_.append("\r\n", 2);
}

void RespWriter::Arg(std::int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  Arg(std::string_view(buf, static_cast<std::size_t>(end - buf)));
}

void RespWriter::Header(char kind, std::size_t n) {
  char buf[24];
  buf[0] = kind;
  auto [end, ec] = std::to_chars(buf + 1, buf + sizeof buf - 2, n);
  *end++ = '\r';
  *end++ = '\n';
  out_.append(buf, static_cast<std::size_t>(end - buf));
}

bool ReadDecisions(const redisReply& reply, std::size_t n, algorithms::Decision* out) {
  if (reply.type == REDIS_REPLY_STRING) {
    std::string_view text(reply.str, reply.len);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t comma = i + 1 < n ? text.find(',') : text.size();
      if (comma == std::string_view::npos || !ReadFusedDecision(text.substr(0, comma), out[i])) {
        return false;
      }
      text.remove_prefix(std::min(text.size(), comma + 1));
    }
    return true;
  }
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != kDecisionValues * n) return false;
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t v[kDecisionValues];
    for (std::size_t k = 0; k < kDecisionValues; ++k) {
      const redisReply& e = *reply.element[kDecisionValues * i + k];
      if (e.type != REDIS_REPLY_INTEGER) return false;
      v[k] = e.integer;
    }
    out[i] = DecisionOfValues(v);
  }
  return true;
}

algorithms::Decision DecisionOfValues(const std::int64_t* v) {
  algorithms::Decision d;
  d.allowed = v[0] == 1;
  d.remaining = v[1];
  d.retry_after_ms = v[2];
  d.delay_ms = v[3];
  d.reset_ms = v[4];
  d.window = static_cast<std::uint8_t>(v[5]);
  d.window_reset_ms = v[6];
  return d;
}

bool ReadLeaseTake(std::string_view& text, std::vector<std::int64_t>& values) {
  const std::size_t comma = text.find(',');
  const std::string_view take = text.substr(0, comma);
  text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
  const char* p = take.data();
  const char* end = p + take.size();
  while (p < end) {
    std::int64_t v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || (next != end && *next != ' ')) return false;
    values.push_back(v);
    p = next == end ? end : next + 1;
  }
  return !take.empty() && take.back() != ' ';
}

const std::string& ScriptSha(int script) {
  static const auto shas = [] {
    std::array<std::string, kRedisScriptCount> out;
    for (int i = 0; i < kRedisScriptCount; ++i) {
      unsigned char digest[SHA_DIGEST_LENGTH];
      SHA1(reinterpret_cast<const unsigned char*>(kRedisScripts[i].body.data()),
           kRedisScripts[i].body.size(), digest);
      for (unsigned char byte : digest) out[i] += fmt::format("{:02x}", byte);
    }
    return out;
  }();
  return shas[script];
}

std::vector<Command> HandshakeCommands(const RedisAddress& address) {
  std::vector<Command> out;
  if (!address.password.empty()) {
    Command auth{"AUTH"};
    if (!address.user.empty()) auth.push_back(address.user);
    auth.push_back(address.password);
    out.push_back(std::move(auth));
  }
  if (address.db != 0) out.push_back({"SELECT", std::to_string(address.db)});
  return out;
}

Command ScriptLoad(int script) {
  return {"SCRIPT", "LOAD", std::string(kRedisScripts[script].body)};
}

std::string Resp(const Command& command) {
  std::string out;
  RespWriter w(out);
  w.Count(command.size());
  for (const std::string& arg : command) w.Arg(arg);
  return out;
}

}  // namespace redis

using namespace redis;

void AppendEscapedKey(std::string_view key, std::string& out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  // Written in place, at most 3 bytes per key byte, then trimmed: a key is
  // escaped on every Redis decision, and appending byte by byte (a capacity
  // check each) was the gateway's own largest cost on the Redis path.
  const std::size_t start = out.size();
  out.resize(start + 3 * key.size());
  char* p = out.data() + start;
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (SafeKeyByte(c)) {
      *p++ = ch;
    } else if (c == 0x1f) {
      *p++ = ':';
    } else {
      *p++ = '%';
      *p++ = kHex[c >> 4];
      *p++ = kHex[c & 15];
    }
  }
  out.resize(static_cast<std::size_t>(p - out.data()));
}

std::string RedisTaggedKey(std::string_view prefix, std::string_view tag, std::string_view middle,
                           std::string_view suffix) {
  std::string out;
  out.reserve(prefix.size() + tag.size() + middle.size() + suffix.size() + 8);
  out.append(prefix);
  out += '{';
  AppendEscapedKey(tag, out);
  out += "}:";
  if (!middle.empty()) {
    AppendEscapedKey(middle, out);
    out += ':';
  }
  out.append(suffix);
  return out;
}

std::string RedisKey(std::string_view prefix, std::string_view key, std::uint32_t fingerprint,
                     std::size_t window) {
  std::string out;
  out.reserve(prefix.size() + 3 * key.size() + 24);
  out.append(prefix);
  out += '{';
  AppendEscapedKey(key, out);
  char tail[40] = "}:";
  for (int i = 0; i < 8; ++i) tail[2 + i] = "0123456789abcdef"[(fingerprint >> (28 - 4 * i)) & 15];
  tail[10] = ':';
  auto [end, ec] = std::to_chars(tail + 11, tail + sizeof tail, window);
  out.append(tail, static_cast<std::size_t>(end - tail));
  return out;
}

std::string_view RedisScriptFor(const LimitSpec& limit) {
  return kRedisScripts[ScriptIndex(limit)].body;
}

const std::string& RedisScriptSha(const LimitSpec& limit) { return ScriptSha(ScriptIndex(limit)); }

std::string RedisDecisionCommand(const LimitSpec& limit, std::string_view prefix,
                                 std::string_view key, std::int64_t cost,
                                 std::optional<std::int64_t> now_ms, std::int64_t min_ttl_ms) {
  ShellWriter w;
  if (FusedTokenBucket(limit)) {
    w.Arg("EVALSHA");
    w.Arg(ScriptSha(ScriptIndex(limit)));
    w.Arg(std::int64_t{1});
    w.Arg(RedisKey(prefix, key, limit.fingerprint, 0));
    WriteFusedTail(limit, now_ms, min_ttl_ms, w);
    w.Arg(std::int64_t{1});  // the key's number of decisions
  } else {
    WriteEvalshaHead(limit, prefix, key, now_ms, min_ttl_ms, w);
  }
  w.Arg(cost);
  return w.out;
}

}  // namespace tollgate::store
