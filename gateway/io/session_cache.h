// Server-side TLS 1.2 sessions by session ID for one TLS listener, shared
// by its SSL_CTXs on every worker thread and carried from one
// configuration to the next (OpenSSL's own cache belongs to one SSL_CTX:
// a reload would empty it). TLS 1.3 resumes with tickets only (see
// ticket_keys.h), so its sessions are not kept. Bounded: the oldest
// session makes room. Thread-safe (a mutex, taken once per full TLS 1.2
// handshake and once per session ID presented).
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_session_st SSL_SESSION;

namespace tollgate::gateway {

class SessionCache {
 public:
  explicit SessionCache(std::size_t capacity) : capacity_(capacity) {}
  ~SessionCache();
  SessionCache(const SessionCache&) = delete;
  SessionCache& operator=(const SessionCache&) = delete;

  // Makes `ctx` keep its sessions here (kept alive by ctx), and in no
  // cache of its own.
  static void Install(SSL_CTX* ctx, std::shared_ptr<SessionCache> cache);

  // Takes a reference to `session`.
  void Add(SSL_SESSION* session);
  // A new reference to the session with `id`; null: none.
  SSL_SESSION* Get(const unsigned char* id, unsigned int size);
  void Remove(SSL_SESSION* session);

 private:
  const std::size_t capacity_;
  std::mutex mutex_;
  std::unordered_map<std::string, SSL_SESSION*> sessions_;
  std::deque<std::string> order_;  // ids in the order they came; may hold removed ones
};

}  // namespace tollgate::gateway
