#include "store/redis_store.h"

#include <fmt/format.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/container/small_vector.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <charconv>
#include <chrono>
#include <csignal>
#include <deque>
#include <limits>
#include <mutex>

#include "store/clock.h"
#include "store/redis_scripts.h"

namespace tollgate::store {
namespace asio = boost::asio;
namespace {

using Steady = std::chrono::steady_clock;

// hiredis writes with plain write(): a connection Redis has closed would
// raise SIGPIPE, whose default action ends the process. Ignored once, before
// the first connection, so such a write fails with EPIPE like any other.
void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

// The gateway's clock (one reading per handler on its threads), on which
// command deadlines and the retry timer are set.
std::int64_t NowMs() { return SteadyClock().NowMs(); }

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

int ScriptIndex(const LimitSpec& limit) {
  return limit.windows.size() == 1 ? static_cast<int>(limit.windows[0].algorithm)
                                   : kMultiWindowScript;
}

bool SafeKeyByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '~' || c == '/' || c == '@' || c == '+' || c == '=' || c == '-';
}

// RESP: "*<n>\r\n" then "$<len>\r\n<bytes>\r\n" per argument. On every
// decision's path: plain appends, no format strings.
class RespWriter {
 public:
  explicit RespWriter(std::string& out) : out_(out) {}
  void Count(std::size_t n) { Header('*', n); }
  void Arg(std::string_view s) {
    Header('$', s.size());
    out_.append(s);
    out_.append("\r\n", 2);
  }
  void Arg(std::int64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    Arg(std::string_view(buf, static_cast<std::size_t>(end - buf)));
  }

 private:
  void Header(char kind, std::size_t n) {
    char buf[24];
    buf[0] = kind;
    auto [end, ec] = std::to_chars(buf + 1, buf + sizeof buf - 2, n);
    *end++ = '\r';
    *end++ = '\n';
    out_.append(buf, static_cast<std::size_t>(end - buf));
  }
  std::string& out_;
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

// The `n` decisions of one script call, in the order of its costs: a
// string of ','-separated fused decisions, or decide.lua's array of 7
// integers per decision.
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
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 7 * n) return false;
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t v[7];
    for (std::size_t k = 0; k < 7; ++k) {
      const redisReply& e = *reply.element[7 * i + k];
      if (e.type != REDIS_REPLY_INTEGER) return false;
      v[k] = e.integer;
    }
    algorithms::Decision& d = out[i];
    d.allowed = v[0] == 1;
    d.remaining = v[1];
    d.retry_after_ms = v[2];
    d.delay_ms = v[3];
    d.reset_ms = v[4];
    d.window = static_cast<std::uint8_t>(v[5]);
    d.window_reset_ms = v[6];
  }
  return true;
}

std::string_view ErrorText(const redisReply& reply) {
  return std::string_view(reply.str, reply.len);
}

using Command = std::vector<std::string>;

// The commands that set a connection up (AUTH, SELECT), sent before anything
// else on it, by CheckRedis() and by every asynchronous connection.
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

// A single token_bucket window is decided by store/lua/token_bucket_fused.lua,
// which takes one or more keys, five arguments and then each key's costs;
// every other limit by decide.lua, one key (two per window) and its costs.
bool FusedTokenBucket(const LimitSpec& limit) {
  return limit.windows.size() == 1 &&
         limit.windows[0].algorithm == algorithms::Algorithm::kTokenBucket;
}

// The number of RESP arguments WriteEvalshaHead() writes for `limit`
// (decide.lua).
std::size_t HeadArgCount(const LimitSpec& limit) {
  const std::size_t windows = limit.windows.size();
  // EVALSHA sha numkeys, two keys per window, now, min_ttl, window count,
  // six parameters per window.
  return 3 + 2 * windows + 3 + 6 * windows;
}

// The first two arguments of every decision script: now_ms ("": server
// time) and min_ttl_ms.
template <typename Writer>
void WriteTimeArgs(std::optional<std::int64_t> now_ms, std::int64_t min_ttl_ms, Writer& out) {
  if (now_ms) {
    out.Arg(*now_ms);
  } else {
    out.Arg(std::string_view());
  }
  out.Arg(min_ttl_ms);
}

// The arguments of token_bucket_fused.lua after its keys and before the
// costs: now_ms (nullopt: server time), min_ttl_ms, limit, window, burst.
constexpr std::size_t kFusedTailArgs = 5;
template <typename Writer>
void WriteFusedTail(const LimitSpec& limit, std::optional<std::int64_t> now_ms,
                    std::int64_t min_ttl_ms, Writer& out) {
  WriteTimeArgs(now_ms, min_ttl_ms, out);
  const algorithms::LimitParams& p = limit.windows[0];
  out.Arg(p.limit);
  out.Arg(p.window_ms);
  out.Arg(p.burst);
}

// "EVALSHA sha numkeys keys... args..." of decide.lua into `out` (which has
// Arg(std::string_view) and Arg(std::int64_t)), up to the costs, which come
// last: one argument per decision. nullopt now_ms: server time. Returns the
// first key (its Cluster slot is the decisions').
template <typename Writer>
std::string WriteEvalshaHead(const LimitSpec& limit, std::string_view prefix, std::string_view key,
                             std::optional<std::int64_t> now_ms, std::int64_t min_ttl_ms,
                             Writer& out) {
  out.Arg("EVALSHA");
  out.Arg(ScriptSha(ScriptIndex(limit)));
  const std::size_t windows = limit.windows.size();
  out.Arg(static_cast<std::int64_t>(2 * windows));
  std::string first_key;
  for (std::size_t i = 0; i < windows; ++i) {
    std::string state_key = RedisKey(prefix, key, limit.fingerprint, i);
    out.Arg(state_key);
    // The second key of a window (sliding_log's counter).
    const std::size_t size = state_key.size();
    state_key += ":n";
    out.Arg(state_key);
    state_key.resize(size);
    if (i == 0) first_key = std::move(state_key);
  }
  WriteTimeArgs(now_ms, min_ttl_ms, out);
  out.Arg(static_cast<std::int64_t>(windows));
  for (const algorithms::LimitParams& p : limit.windows) {
    out.Arg(algorithms::AlgorithmName(p.algorithm));
    out.Arg(p.limit);
    out.Arg(p.window_ms);
    out.Arg(p.burst);
    out.Arg(p.sub_windows);
    out.Arg(std::int64_t{p.shaping == algorithms::Shaping::kNoDelay ? 1 : 0});
  }
  return first_key;
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

}  // namespace

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

// A blocking connection for startup checks (never on an I/O thread).
class SyncConnection {
 public:
  SyncConnection(const RedisAddress& a, std::int64_t timeout_ms)
      : where_(fmt::format("redis {}:{}", a.host, a.port)),
        c_(redisConnectWithTimeout(a.host.c_str(), a.port, Timeval(timeout_ms)), &redisFree) {
    IgnoreSigpipe();
    if (c_ && c_->err == 0) redisSetTimeout(c_.get(), Timeval(timeout_ms));
  }
  bool Connected() const { return c_ && c_->err == 0; }
  std::string ConnectError() const {
    return fmt::format("{}: cannot connect: {}", where_, c_ ? c_->errstr : "out of memory");
  }
  const std::string& Where() const { return where_; }
  // The reply (null when the connection failed); `text` is set to the
  // error when there is one.
  std::unique_ptr<redisReply, void (*)(void*)> Run(const Command& args, std::string& text) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const std::string& s : args) {
      argv.push_back(s.data());
      lens.push_back(s.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_.get(), static_cast<int>(argv.size()), argv.data(), lens.data()));
    std::unique_ptr<redisReply, void (*)(void*)> reply(r, &freeReplyObject);
    text.clear();
    if (!reply) {
      text = c_->errstr;
    } else if (reply->type == REDIS_REPLY_ERROR) {
      text = std::string(ErrorText(*reply));
    }
    return reply;
  }

 private:
  static timeval Timeval(std::int64_t ms) {
    return timeval{ms / 1000, static_cast<suseconds_t>(ms % 1000 * 1000)};
  }
  std::string where_;
  std::unique_ptr<redisContext, decltype(&redisFree)> c_;
};

std::optional<std::string> CheckRedis(const RedisOptions& options, bool& fatal) {
  fatal = false;
  // A cluster: its first seed that answers stands for it (every node loads
  // the scripts again when the gateway connects to it).
  const RedisAddress& a = options.nodes.empty() ? options.address : options.nodes[0];
  SyncConnection c(a, options.connect_timeout_ms);
  if (!c.Connected()) return c.ConnectError();
  const std::string& where = c.Where();
  std::string text;
  for (const Command& handshake : HandshakeCommands(a)) {
    auto r = c.Run(handshake, text);
    if (text.empty()) continue;
    fatal = r != nullptr;
    if (handshake.front() == "AUTH") {
      return fmt::format("{}: authentication failed: {}", where, text);
    }
    return fmt::format("{}: cannot select database {}: {}", where, a.db, text);
  }
  for (int i = 0; i < kRedisScriptCount; ++i) {
    auto r = c.Run(ScriptLoad(i), text);
    if (!text.empty()) {
      fatal = r != nullptr && text.rfind("NOAUTH", 0) == 0;
      return fmt::format("{}: cannot load the {} script: {}", where, kRedisScripts[i].name, text);
    }
    if (r->type != REDIS_REPLY_STRING || std::string_view(r->str, r->len) != ScriptSha(i)) {
      return fmt::format("{}: SCRIPT LOAD answered an unexpected digest", where);
    }
  }
  return std::nullopt;
}

enum class PendingKind : std::uint8_t { kDecide, kCount, kHandshake, kScriptLoad, kAsking };

// A decision waiting in a script call: its cost and, in a
// token_bucket_fused.lua call, the index of its key in the call's keys.
struct DecisionWaiter {
  DecisionSink* sink;
  std::int64_t cost;
  std::uint32_t key = 0;
};

// How the text of a queued script call (QueuedCall::call) becomes its
// command (Connection::CallCommand).
struct CallShape {
  // decide.lua: the text is the RESP arguments before the costs, `args` of
  // them. token_bucket_fused.lua: its first `tail_bytes` bytes are the
  // `args` arguments after the keys and before the costs.
  std::size_t args = 0;
  const std::string* fused_sha = nullptr;  // token_bucket_fused.lua's; null: decide.lua
  std::size_t tail_bytes = 0;
};

// A decision for Connection::Queue: decisions with the same `call` share a
// script call.
struct QueuedCall {
  // See CallShape; for token_bucket_fused.lua with Redis Cluster followed by
  // the key, so that a call has one key and one slot.
  std::string_view call;
  CallShape shape;
  std::string_view key;  // token_bucket_fused.lua: the key, one RESP argument
  std::uint16_t slot = 0;
  std::int64_t deadline = 0;
};

// A command awaiting its reply on a connection (or, for decisions, its
// turn to be written: see Connection::Queue).
struct RedisStore::Pending {
  PendingKind kind;
  CountSink* count = nullptr;  // kCount; null: nobody waits
  std::int64_t deadline = 0;
  // kDecide, kCount: resent after NOSCRIPT or a redirect. A kDecide not yet
  // written holds its QueuedCall::call instead.
  std::string command{};
  bool done = false;       // completed (timed out): its reply is dropped
  int moved = 0;           // Redis Cluster MOVED answers followed so far
  int moved_to = -1;       // the node its last MOVED named (routes it without a slot map)
  std::uint16_t slot = 0;  // of its keys (Redis Cluster routing)
  // kDecide: the decisions of this script call (once written: in the order
  // of its costs and replies).
  boost::container::small_vector<DecisionWaiter, 1> waiters{};
  // kDecide not yet written: how its command is written; the keys of a
  // token_bucket_fused.lua call as RESP arguments, and their hashes.
  CallShape shape{};
  boost::container::small_vector<std::string, 1> keys{};
  boost::container::small_vector<std::size_t, 1> key_hashes{};

  // Completes it (once) with a failure.
  void Fail(StoreStatus status, RedisHealth& health) {
    if (done) return;
    done = true;
    if (status == StoreStatus::kUnavailable) {
      health.unavailable.fetch_add(kind == PendingKind::kDecide ? waiters.size() : 1,
                                   std::memory_order_relaxed);
    }
    for (const DecisionWaiter& w : waiters) w.sink->OnDecision({status, {}});
    if (kind == PendingKind::kCount && count != nullptr) count->OnCount({status, 0});
  }
};

bool IsRedirect(std::string_view error) {
  return error.starts_with("MOVED ") || error.starts_with("ASK ") || error.starts_with("TRYAGAIN");
}

struct RedisStore::Shared {
  Shared(asio::io_context& i, const RedisOptions& o, RedisHealth& h)
      : io(i), options(o), health(h), retry_timer(i) {
    // A reply is read into an array of kMaxBatch decisions.
    options.batch = std::min(options.batch, RedisOptions::kMaxBatch);
  }
  asio::io_context& io;
  RedisOptions options;
  RedisHealth& health;
  std::vector<std::string> handshake;     // AUTH/SELECT as RESP (HandshakeCommands)
  std::vector<std::string> script_loads;  // SCRIPT LOAD of every script as RESP
  std::deque<Pending> retry;              // TRYAGAIN, MOVED again: sent when retry_timer fires
  asio::steady_timer retry_timer;
};

// One hiredis asynchronous connection on Asio: hiredis's event hooks
// (addRead/delRead/addWrite/delWrite/cleanup) become waits on a
// stream_descriptor over hiredis's socket. Replies arrive in command order,
// so pending_ is a FIFO matched one to one with hiredis's callbacks.
class RedisStore::Connection {
 public:
  Connection(Shared& shared, RedisStore& owner, const RedisAddress& address)
      : shared_(shared), owner_(owner), address_(address), timer_(shared.io), retry_(shared.io) {
    Connect();
  }

  ~Connection() {
    shutting_down_ = true;
    life_.reset();
    // Completes every pending callback with a null reply (-> kUnavailable).
    if (ac_ != nullptr) redisAsyncFree(ac_);
    FailAll(StoreStatus::kUnavailable);
    if (up_) shared_.health.connections_up.fetch_sub(1, std::memory_order_relaxed);
    if (open_) shared_.health.circuits_open.fetch_sub(1, std::memory_order_relaxed);
  }

  // Whether a decision may be sent now. While the circuit is open one probe
  // per breaker_open_ms goes through.
  bool Usable(std::int64_t now) {
    if (ac_ == nullptr ||
        pending_.size() - setup_pending_ + unsent_.size() >= shared_.options.max_pending) {
      return false;
    }
    if (!open_) return true;
    if (now < open_until_) return false;
    open_until_ = now + shared_.options.breaker_open_ms;
    return true;
  }

  // Sends `p` (a decision or a count) and awaits its reply until its
  // deadline; completes it at once when it cannot be sent.
  void Submit(Pending p) {
    if (!Send(p.command)) {
      Fail(p, StoreStatus::kUnavailable);
      return;
    }
    const std::int64_t deadline = p.deadline;
    pending_.push_back(std::move(p));
    ArmDeadline(deadline);
  }

  // Adds a decision to the script call this connection writes next: the
  // call with the same QueuedCall::call (the same limit and time, and for
  // decide.lua the same key) while it has room for more (options.batch),
  // or a new one. So concurrent decisions of one limit cost Redis one call,
  // decided one after the other exactly as separate calls would be.
  void Queue(const QueuedCall& q, DecisionWaiter waiter) {
    Pending* p = nullptr;
    if (auto it = by_call_.find(q.call); it != by_call_.end() && !it->second->done &&
                                         it->second->waiters.size() < shared_.options.batch) {
      p = it->second;
      shared_.health.coalesced.fetch_add(1, std::memory_order_relaxed);
    } else {
      p = &unsent_.emplace_back(Pending{Kind::kDecide, nullptr, q.deadline, std::string(q.call)});
      p->shape = q.shape;
      p->slot = q.slot;
      by_call_.insert_or_assign(std::string_view(p->command), p);
      ArmDeadline(q.deadline);
      // The write wait fires after the handlers that are ready now have
      // run: the decisions they make join these calls.
      ArmWrite();
    }
    if (q.shape.fused_sha != nullptr) waiter.key = KeyIndex(*p, q.key);
    p->waiters.push_back(waiter);
  }

  // Sends `p` again here (a cluster redirect); `asking`: after ASKING.
  void Resend(Pending p, bool asking) {
    if (p.done) return;
    if (asking) {
      static constexpr std::string_view kAsking = "*1\r\n$6\r\nASKING\r\n";
      if (Send(kAsking)) {
        pending_.push_back({Kind::kAsking, nullptr, p.deadline});
        ++setup_pending_;
      }
    }
    Submit(std::move(p));
  }

  // Completes `p` (once) with a failure.
  void Fail(Pending& p, StoreStatus status) { p.Fail(status, shared_.health); }

 private:
  using Kind = PendingKind;

  static void OnReply(redisAsyncContext*, void* reply, void* privdata) {
    static_cast<Connection*>(privdata)->HandleReply(static_cast<redisReply*>(reply));
  }
  static void OnConnect(const redisAsyncContext* ac, int status) {
    auto* self = static_cast<Connection*>(ac->data);
    if (status != REDIS_OK) self->Lost(ac->errstr);
  }
  static void OnDisconnect(const redisAsyncContext* ac, int) {
    static_cast<Connection*>(ac->data)->Lost(ac->err != 0 ? ac->errstr : "closed");
  }
  static void AddRead(void* p) {
    auto* self = static_cast<Connection*>(p);
    self->want_read_ = true;
    self->ArmRead();
  }
  static void DelRead(void* p) { static_cast<Connection*>(p)->want_read_ = false; }
  static void AddWrite(void* p) {
    auto* self = static_cast<Connection*>(p);
    self->want_write_ = true;
    self->ArmWrite();
  }
  static void DelWrite(void* p) { static_cast<Connection*>(p)->want_write_ = false; }
  static void Cleanup(void* p) {
    auto* self = static_cast<Connection*>(p);
    self->want_read_ = self->want_write_ = false;
    if (self->descriptor_) {
      // hiredis owns and closes the socket.
      self->descriptor_->release();
      self->descriptor_.reset();
    }
  }

  void Connect() {
    IgnoreSigpipe();
    const RedisAddress& a = address_;
    redisAsyncContext* ac = redisAsyncConnect(a.host.c_str(), a.port);
    if (ac == nullptr || ac->err != 0) {
      if (ac != nullptr) redisAsyncFree(ac);
      ScheduleReconnect();
      return;
    }
    ac_ = ac;
    ac->data = this;
    descriptor_.emplace(shared_.io, ac->c.fd);
    ac->ev.data = this;
    ac->ev.addRead = &AddRead;
    ac->ev.delRead = &DelRead;
    ac->ev.addWrite = &AddWrite;
    ac->ev.delWrite = &DelWrite;
    ac->ev.cleanup = &Cleanup;
    redisAsyncSetConnectCallback(ac, &OnConnect);
    redisAsyncSetDisconnectCallback(ac, &OnDisconnect);
    // Sending is what completes hiredis's non-blocking connect.
    const std::int64_t deadline = NowMs() + shared_.options.connect_timeout_ms;
    for (const std::string& command : shared_.handshake) {
      if (!Send(command)) return;
      pending_.push_back({Kind::kHandshake, nullptr, deadline});
      ++setup_pending_;
    }
    SendScriptLoads(deadline);
    ArmDeadline(deadline);
  }

  void SendScriptLoads(std::int64_t deadline) {
    for (const std::string& command : shared_.script_loads) {
      if (!Send(command)) return;
      pending_.push_back({Kind::kScriptLoad, nullptr, deadline});
      ++setup_pending_;
    }
  }

  bool Send(std::string_view command) {
    return ac_ != nullptr && redisAsyncFormattedCommand(ac_, &OnReply, this, command.data(),
                                                        command.size()) == REDIS_OK;
  }

  void HandleReply(redisReply* reply) {
    if (pending_.empty()) return;
    Pending p = Pop();
    if (reply == nullptr) {
      Fail(p, StoreStatus::kUnavailable);
      return;
    }
    if (!up_) {
      up_ = true;
      backoff_ms_ = 0;
      shared_.health.connections_up.fetch_add(1, std::memory_order_relaxed);
      spdlog::info("redis {}:{}: connected", address_.host, address_.port);
    }
    switch (p.kind) {
      case Kind::kHandshake:
        if (reply->type == REDIS_REPLY_ERROR) {
          spdlog::error("redis {}:{}: {}", address_.host, address_.port, ErrorText(*reply));
          Drop();
        }
        return;
      case Kind::kScriptLoad:
      case Kind::kAsking:
        return;
      case Kind::kDecide:
      case Kind::kCount:
        break;
    }
    if (reply->type == REDIS_REPLY_ERROR && ErrorText(*reply).starts_with("NOSCRIPT")) {
      // SCRIPT FLUSH or a restarted Redis: load the scripts and send again.
      shared_.health.noscript.fetch_add(1, std::memory_order_relaxed);
      if (p.done) return;
      SendScriptLoads(p.deadline);
      Submit(std::move(p));
      return;
    }
    if (reply->type == REDIS_REPLY_ERROR && IsRedirect(ErrorText(*reply))) {
      // Redis Cluster: the slot lives (or is moving) elsewhere.
      owner_.Redirect(std::move(p), ErrorText(*reply));
      return;
    }
    if (p.kind == Kind::kCount) {
      HandleCount(p, *reply);
      return;
    }
    std::array<algorithms::Decision, RedisOptions::kMaxBatch> decisions;
    const std::size_t n = p.waiters.size();
    if (!ReadDecisions(*reply, n, decisions.data())) {
      shared_.health.errors.fetch_add(1, std::memory_order_relaxed);
      if (reply->type == REDIS_REPLY_ERROR && !error_logged_) {
        error_logged_ = true;
        spdlog::error("redis: the decision script failed: {}", ErrorText(*reply));
      }
      Failure(NowMs());
      Fail(p, StoreStatus::kError);
      return;
    }
    Success();
    if (p.done) return;
    p.done = true;
    for (std::size_t i = 0; i < n; ++i) {
      p.waiters[i].sink->OnDecision({StoreStatus::kOk, decisions[i]});
    }
  }

  void HandleCount(Pending& p, const redisReply& reply) {
    if (reply.type != REDIS_REPLY_INTEGER) {
      shared_.health.errors.fetch_add(1, std::memory_order_relaxed);
      if (reply.type == REDIS_REPLY_ERROR && !error_logged_) {
        error_logged_ = true;
        spdlog::error("redis: an upstream-protection script failed: {}", ErrorText(reply));
      }
      Failure(NowMs());
      Fail(p, StoreStatus::kError);
      return;
    }
    Success();
    if (!p.done && p.count != nullptr) p.count->OnCount({StoreStatus::kOk, reply.integer});
  }

  Pending Pop() {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    if (p.kind != Kind::kDecide && p.kind != Kind::kCount) --setup_pending_;
    return p;
  }

  void FailAll(StoreStatus status) {
    by_call_.clear();
    while (!unsent_.empty()) {
      Pending p = std::move(unsent_.front());
      unsent_.pop_front();
      Fail(p, status);
    }
    while (!pending_.empty()) {
      Pending p = Pop();
      Fail(p, status);
    }
  }

  // The index of `key` among the keys of `p`, a token_bucket_fused.lua
  // call; added if new.
  static std::uint32_t KeyIndex(Pending& p, std::string_view key) {
    const std::size_t hash = std::hash<std::string_view>{}(key);
    for (std::size_t i = 0; i < p.keys.size(); ++i) {
      if (p.key_hashes[i] == hash && p.keys[i] == key) return static_cast<std::uint32_t>(i);
    }
    p.keys.emplace_back(key);
    p.key_hashes.push_back(hash);
    return static_cast<std::uint32_t>(p.keys.size() - 1);
  }

  // The whole command of a queued call (Queue), its costs included; its
  // waiters in the order of the costs.
  static std::string CallCommand(Pending& p) {
    std::string command;
    command.reserve(p.command.size() + 16 + 8 * p.waiters.size());
    RespWriter w(command);
    const CallShape& shape = p.shape;
    if (shape.fused_sha == nullptr) {
      w.Count(shape.args + p.waiters.size());
      command.append(p.command);
      for (const DecisionWaiter& waiter : p.waiters) w.Arg(waiter.cost);
      return command;
    }
    // EVALSHA sha numkeys keys... tail, then per key: count, costs.
    const std::size_t keys = p.keys.size();
    w.Count(3 + keys + shape.args + keys + p.waiters.size());
    w.Arg("EVALSHA");
    w.Arg(*shape.fused_sha);
    w.Arg(static_cast<std::int64_t>(keys));
    for (const std::string& key : p.keys) command.append(key);
    command.append(p.command, 0, shape.tail_bytes);
    // Grouped by key, stably: an insertion sort, as the waiters are few and
    // mostly in order already (keys are numbered as they first come).
    for (std::size_t i = 1; i < p.waiters.size(); ++i) {
      const DecisionWaiter moving = p.waiters[i];
      std::size_t j = i;
      for (; j > 0 && p.waiters[j - 1].key > moving.key; --j) p.waiters[j] = p.waiters[j - 1];
      p.waiters[j] = moving;
    }
    for (std::size_t i = 0; i < p.waiters.size();) {
      std::size_t end = i;
      while (end < p.waiters.size() && p.waiters[end].key == p.waiters[i].key) ++end;
      w.Arg(static_cast<std::int64_t>(end - i));
      for (; i < end; ++i) w.Arg(p.waiters[i].cost);
    }
    return command;
  }

  // Writes the queued decisions' script calls (Queue).
  void SendUnsent() {
    by_call_.clear();
    // New decisions that the failures below make queue for the next write.
    flushing_.swap(unsent_);
    while (!flushing_.empty()) {
      Pending p = std::move(flushing_.front());
      flushing_.pop_front();
      if (p.done) continue;
      p.command = CallCommand(p);
      p.keys.clear();
      p.key_hashes.clear();
      Submit(std::move(p));
    }
  }

  void Success() {
    failures_ = 0;
    if (open_) {
      open_ = false;
      shared_.health.circuits_open.fetch_sub(1, std::memory_order_relaxed);
      spdlog::info("redis: circuit closed");
    }
  }

  void Failure(std::int64_t now) {
    if (++failures_ >= shared_.options.breaker_failures && !open_) {
      open_ = true;
      shared_.health.circuits_open.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("redis: circuit open after {} failures in a row", failures_);
    }
    if (open_) open_until_ = now + shared_.options.breaker_open_ms;
  }

  // The connection is gone (hiredis frees the context after this).
  void Lost(const char* why) {
    if (ac_ == nullptr) return;
    ac_ = nullptr;
    FailAll(StoreStatus::kUnavailable);
    if (up_) {
      up_ = false;
      shared_.health.connections_up.fetch_sub(1, std::memory_order_relaxed);
      if (!shutting_down_) {
        spdlog::warn("redis {}:{}: connection lost: {}", address_.host, address_.port, why);
      }
    }
    if (!shutting_down_) ScheduleReconnect();
  }

  // Closes the connection from outside hiredis's callbacks.
  void Drop() {
    asio::post(shared_.io, [this, life = std::weak_ptr<char>(life_)] {
      if (life.expired() || ac_ == nullptr) return;
      redisAsyncContext* ac = ac_;
      redisAsyncFree(ac);  // -> OnDisconnect/Lost
      Lost("dropped");
    });
  }

  void ScheduleReconnect() {
    backoff_ms_ = backoff_ms_ == 0 ? 25 : std::min(backoff_ms_ * 2, shared_.options.max_backoff_ms);
    retry_.expires_after(std::chrono::milliseconds(backoff_ms_));
    retry_.async_wait([this, life = std::weak_ptr<char>(life_)](boost::system::error_code ec) {
      if (ec || life.expired() || ac_ != nullptr) return;
      Connect();
    });
  }

  void ArmRead() {
    if (reading_ || !descriptor_) return;
    reading_ = true;
    descriptor_->async_wait(
        asio::posix::stream_descriptor::wait_read,
        [this, life = std::weak_ptr<char>(life_)](boost::system::error_code ec) {
          if (life.expired()) return;
          reading_ = false;
          if (ec || ac_ == nullptr) return;
          if (want_read_) redisAsyncHandleRead(ac_);
          if (want_read_ && ac_ != nullptr) ArmRead();
        });
  }

  void ArmWrite() {
    if (writing_ || !descriptor_) return;
    writing_ = true;
    descriptor_->async_wait(
        asio::posix::stream_descriptor::wait_write,
        [this, life = std::weak_ptr<char>(life_)](boost::system::error_code ec) {
          if (life.expired()) return;
          if (ec || ac_ == nullptr) {
            writing_ = false;
            return;
          }
          // (Still `writing_`: hiredis's AddWrite for these waits no more.)
          SendUnsent();
          writing_ = false;
          if (want_write_ && ac_ != nullptr) redisAsyncHandleWrite(ac_);
          if ((want_write_ || !unsent_.empty()) && ac_ != nullptr) ArmWrite();
        });
  }

  void ArmDeadline(std::int64_t deadline) {
    if (deadline >= armed_for_) return;
    armed_for_ = deadline;
    timer_.expires_at(Steady::time_point(std::chrono::milliseconds(deadline)));
    timer_.async_wait([this, life = std::weak_ptr<char>(life_)](boost::system::error_code ec) {
      if (ec || life.expired()) return;  // aborted: re-armed earlier, or closing
      armed_for_ = std::numeric_limits<std::int64_t>::max();
      ExpireOverdue();
    });
  }

  void ExpireOverdue() {
    const std::int64_t now = NowMs();
    std::int64_t next = std::numeric_limits<std::int64_t>::max();
    bool handshake_overdue = false;
    // By index: a sink may send another decision, which appends.
    for (std::deque<Pending>* queue : {&unsent_, &pending_}) {
      for (std::size_t i = 0; i < queue->size(); ++i) {
        Pending& p = (*queue)[i];
        if (p.kind != Kind::kDecide && p.kind != Kind::kCount) {
          if (p.deadline <= now && !up_) handshake_overdue = true;
          continue;
        }
        if (p.done) continue;
        if (p.deadline > now) {
          next = std::min(next, p.deadline);
          continue;
        }
        shared_.health.timeouts.fetch_add(std::max<std::size_t>(1, p.waiters.size()),
                                          std::memory_order_relaxed);
        Failure(now);
        // Taken out first: a sink may queue another decision (which may
        // join an unsent call, or append to a queue).
        Pending overdue{p.kind, p.count, p.deadline};
        overdue.waiters = std::move(p.waiters);
        p.waiters.clear();
        p.done = true;
        Fail(overdue, StoreStatus::kTimeout);
      }
    }
    if (handshake_overdue) {
      Drop();
      return;
    }
    if (next != std::numeric_limits<std::int64_t>::max()) ArmDeadline(next);
  }

  Shared& shared_;
  RedisStore& owner_;
  const RedisAddress address_;
  redisAsyncContext* ac_ = nullptr;
  std::optional<asio::posix::stream_descriptor> descriptor_;
  asio::steady_timer timer_;  // the earliest deadline of pending_
  asio::steady_timer retry_;  // reconnect backoff
  std::int64_t armed_for_ = std::numeric_limits<std::int64_t>::max();
  std::deque<Pending> pending_;
  // Decisions not yet written (Queue), by their QueuedCall::call (views of
  // their `command`).
  std::deque<Pending> unsent_;
  std::deque<Pending> flushing_;  // SendUnsent's
  boost::unordered_flat_map<std::string_view, Pending*, std::hash<std::string_view>> by_call_;
  std::size_t setup_pending_ = 0;  // handshake and script loads in pending_: not bounded
  std::shared_ptr<char> life_ = std::make_shared<char>();  // handlers check it
  bool want_read_ = false;
  bool want_write_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool up_ = false;
  bool open_ = false;
  bool shutting_down_ = false;
  bool error_logged_ = false;
  int failures_ = 0;
  std::int64_t open_until_ = 0;
  std::int64_t backoff_ms_ = 0;
};

std::uint16_t RedisSlot(std::string_view key) {
  // CRC16-CCITT (XMODEM), as Redis Cluster computes it, over the hash tag:
  // the bytes between the first '{' and the next '}' when not empty.
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  std::uint16_t crc = 0;
  for (char ch : key) {
    crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(ch) << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
  }
  return static_cast<std::uint16_t>(crc % kRedisSlots);
}

std::optional<RedisSlotMap> FetchClusterSlots(const RedisOptions& options, std::string& error) {
  for (const RedisAddress& seed : options.nodes) {
    SyncConnection c(seed, options.connect_timeout_ms);
    if (!c.Connected()) {
      error = c.ConnectError();
      continue;
    }
    bool setup_failed = false;
    for (const Command& handshake : HandshakeCommands(seed)) {
      std::string text;
      c.Run(handshake, text);
      if (!text.empty()) {
        error = fmt::format("redis {}:{}: {}", seed.host, seed.port, text);
        setup_failed = true;
      }
    }
    if (setup_failed) continue;
    std::string text;
    auto reply = c.Run({"CLUSTER", "SLOTS"}, text);
    if (!text.empty() || reply->type != REDIS_REPLY_ARRAY) {
      error = fmt::format("redis {}:{}: CLUSTER SLOTS failed: {}", seed.host, seed.port, text);
      continue;
    }
    RedisSlotMap map;
    for (std::size_t i = 0; i < reply->elements; ++i) {
      const redisReply& range = *reply->element[i];
      if (range.type != REDIS_REPLY_ARRAY || range.elements < 3) continue;
      const redisReply& master = *range.element[2];
      if (master.type != REDIS_REPLY_ARRAY || master.elements < 2) continue;
      RedisAddress node = seed;
      if (master.element[0]->type == REDIS_REPLY_STRING && master.element[0]->len > 0) {
        node.host.assign(master.element[0]->str, master.element[0]->len);
      }
      node.port = static_cast<std::uint16_t>(master.element[1]->integer);
      map.push_back({range.element[0]->integer, range.element[1]->integer, node});
    }
    return map;
  }
  return std::nullopt;
}

RedisStore::RedisStore(asio::io_context& io, const RedisOptions& options, RedisHealth& health)
    : shared_(std::make_unique<Shared>(io, options, health)) {
  const RedisAddress& credentials = options.nodes.empty() ? options.address : options.nodes[0];
  for (const Command& c : HandshakeCommands(credentials)) shared_->handshake.push_back(Resp(c));
  for (int i = 0; i < kRedisScriptCount; ++i) shared_->script_loads.push_back(Resp(ScriptLoad(i)));
  if (options.nodes.empty()) {
    NodeIndex(options.address);
    return;
  }
  // Redis Cluster: the slot map now (startup), then MOVED keeps it current.
  slots_.assign(kRedisSlots, 0);
  std::string error;
  if (std::optional<RedisSlotMap> map = FetchClusterSlots(options, error)) {
    for (const RedisSlotRange& range : *map) {
      const int node = NodeIndex(range.node);
      for (std::int64_t slot = range.first; slot <= range.last && slot < kRedisSlots; ++slot) {
        slots_[static_cast<std::size_t>(slot)] = node;
      }
    }
  } else {
    spdlog::warn("redis cluster: no slot map yet ({}); redirects will teach it", error);
    NodeIndex(options.nodes[0]);
  }
}

RedisStore::~RedisStore() {
  for (Pending& p : shared_->retry) p.Fail(StoreStatus::kUnavailable, shared_->health);
  shared_->retry.clear();
  nodes_.clear();  // completes what is pending on the connections
}

int RedisStore::NodeIndex(const RedisAddress& address) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].address.host == address.host && nodes_[i].address.port == address.port) {
      return static_cast<int>(i);
    }
  }
  Node& node = nodes_.emplace_back();
  node.address = address;
  if (!shared_->options.nodes.empty()) {
    // Credentials and database come from the first seed.
    const RedisAddress& seed = shared_->options.nodes[0];
    node.address.user = seed.user;
    node.address.password = seed.password;
  }
  for (std::size_t i = 0; i < std::max<std::size_t>(1, shared_->options.pool); ++i) {
    node.connections.push_back(std::make_unique<Connection>(*shared_, *this, node.address));
  }
  return static_cast<int>(nodes_.size() - 1);
}

RedisStore::Connection* RedisStore::PickOnNode(std::int64_t now, std::size_t node_index) {
  Node& node = nodes_[node_index];
  const std::size_t n = node.connections.size();
  for (std::size_t i = 0; i < n; ++i) {
    Connection* c = node.connections[node.next++ % n].get();
    if (c->Usable(now)) return c;
  }
  return nullptr;
}

std::size_t RedisStore::NodeOfSlot(std::uint16_t slot) const {
  return slots_.empty() ? 0 : static_cast<std::size_t>(slots_[slot]);
}

RedisStore::Connection* RedisStore::PickConnection(std::int64_t now, std::uint16_t slot) {
  Connection* c = PickOnNode(now, NodeOfSlot(slot));
  if (c == nullptr) shared_->health.unavailable.fetch_add(1, std::memory_order_relaxed);
  return c;
}

void RedisStore::Redirect(Pending p, std::string_view error) {
  if (p.done) return;
  shared_->health.redirects.fetch_add(1, std::memory_order_relaxed);
  if (error.starts_with("TRYAGAIN")) {
    // A multi-key script during a slot migration: its keys are split
    // between the two nodes for a moment. Sent again shortly, routed anew.
    RetryLater(std::move(p));
    return;
  }
  // "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>".
  const bool ask = error.starts_with("ASK ");
  std::string_view rest = error.substr(ask ? 4 : 6);
  const std::size_t space = rest.find(' ');
  const std::size_t colon = rest.rfind(':');
  std::int64_t slot = -1;
  unsigned port = 0;
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space ||
      std::from_chars(rest.data(), rest.data() + space, slot).ec != std::errc() ||
      std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), port).ec != std::errc() ||
      slot < 0 || slot >= kRedisSlots || port == 0 || port > 65535) {
    p.Fail(StoreStatus::kError, shared_->health);
    return;
  }
  RedisAddress target;
  target.host = std::string(rest.substr(space + 1, colon - space - 1));
  target.port = static_cast<std::uint16_t>(port);
  const int node = NodeIndex(target);
  if (!ask) {
    if (!slots_.empty()) slots_[static_cast<std::size_t>(slot)] = node;
    p.moved_to = node;
    if (++p.moved > 1) {
      // Sent back by the node it was sent to: the masters disagree about
      // the slot, as between the two ends' CLUSTER SETSLOT NODE of a
      // migration. Going back and forth at once would only spin until they
      // agree.
      RetryLater(std::move(p));
      return;
    }
  }
  if (Connection* c = PickOnNode(NowMs(), static_cast<std::size_t>(node))) {
    c->Resend(std::move(p), ask);
  } else {
    p.Fail(StoreStatus::kUnavailable, shared_->health);
  }
}

void RedisStore::RetryLater(Pending p) {
  shared_->retry.push_back(std::move(p));
  if (shared_->retry.size() == 1) {
    shared_->retry_timer.expires_after(std::chrono::milliseconds(kRetryAfterMs));
    shared_->retry_timer.async_wait([this](boost::system::error_code ec) {
      if (!ec) RetryNow();
    });
  }
}

void RedisStore::RetryNow() {
  std::deque<Pending> ready;
  ready.swap(shared_->retry);
  const std::int64_t now = NowMs();
  for (Pending& p : ready) {
    if (now >= p.deadline) {
      shared_->health.timeouts.fetch_add(1, std::memory_order_relaxed);
      p.Fail(StoreStatus::kTimeout, shared_->health);
      continue;
    }
    const std::size_t node = slots_.empty() && p.moved_to >= 0
                                 ? static_cast<std::size_t>(p.moved_to)
                                 : NodeOfSlot(p.slot);
    if (Connection* c = PickOnNode(now, node)) {
      c->Resend(std::move(p), false);
    } else {
      p.Fail(StoreStatus::kUnavailable, shared_->health);
    }
  }
}

const RedisOptions& RedisStore::options() const { return shared_->options; }

void RedisStore::Run(RedisAux script, std::initializer_list<std::string_view> keys,
                     std::initializer_list<std::string_view> args, CountSink* sink) {
  const std::int64_t now = NowMs();
  const std::uint16_t slot = keys.size() > 0 && !slots_.empty() ? RedisSlot(*keys.begin()) : 0;
  Connection* connection = PickConnection(now, slot);
  if (connection == nullptr) {
    if (sink != nullptr) sink->OnCount({StoreStatus::kUnavailable, 0});
    return;
  }
  std::string command;
  RespWriter w(command);
  w.Count(3 + keys.size() + args.size());
  w.Arg("EVALSHA");
  w.Arg(ScriptSha(static_cast<int>(script)));
  w.Arg(static_cast<std::int64_t>(keys.size()));
  for (std::string_view k : keys) w.Arg(k);
  for (std::string_view a : args) w.Arg(a);
  Pending p{PendingKind::kCount, sink, now + shared_->options.timeout_ms, std::move(command)};
  p.slot = slot;
  connection->Submit(std::move(p));
}

void RedisStore::Decide(const DecideRequest& request, DecisionSink& sink) {
  const std::int64_t now = NowMs();
  const LimitSpec& limit = *request.limit;
  const RedisOptions& o = shared_->options;
  std::optional<std::int64_t> now_ms;
  if (o.time == RedisTime::kClient) now_ms = request.now_ms;
  std::string& call = call_;
  call.clear();
  RespWriter w(call);
  QueuedCall q;
  std::string first_key;
  if (FusedTokenBucket(limit)) {
    WriteFusedTail(limit, now_ms, o.min_ttl_ms, w);
    q.shape = {kFusedTailArgs, &ScriptSha(ScriptIndex(limit)), call.size()};
    first_key = RedisKey(o.prefix, request.key, limit.fingerprint, 0);
    key_.clear();
    RespWriter(key_).Arg(first_key);
    q.key = key_;
    // Keys of one call must share a slot: with Redis Cluster, a call per key.
    if (!slots_.empty()) call.append(key_);
  } else {
    first_key = WriteEvalshaHead(limit, o.prefix, request.key, now_ms, o.min_ttl_ms, w);
    q.shape.args = HeadArgCount(limit);
  }
  q.call = call;
  q.slot = slots_.empty() ? 0 : RedisSlot(first_key);
  q.deadline = now + o.timeout_ms;
  Connection* connection = PickConnection(now, q.slot);
  if (connection == nullptr) {
    sink.OnDecision({StoreStatus::kUnavailable, {}});
    return;
  }
  connection->Queue(q, {&sink, request.cost});
}

}  // namespace tollgate::store
