#include "gateway/io/session_cache.h"

#include <openssl/ssl.h>

#include "gateway/io/ssl_ctx_ref.h"

namespace tollgate::gateway {
namespace {

using Ref = SslCtxRef<SessionCache>;

std::string IdOf(const SSL_SESSION* session) {
  unsigned int size = 0;
  const unsigned char* id = SSL_SESSION_get_id(session, &size);
  return std::string(reinterpret_cast<const char*>(id), size);
}

// 1: the cache took the reference OpenSSL passed; 0: OpenSSL drops it.
int OnNewSession(SSL* ssl, SSL_SESSION* session) {
  SessionCache* cache = Ref::Get(SSL_get_SSL_CTX(ssl));
  if (cache == nullptr || SSL_version(ssl) >= TLS1_3_VERSION) return 0;
  cache->Add(session);
  return 1;
}

SSL_SESSION* OnGetSession(SSL* ssl, const unsigned char* id, int size, int* copy) {
  *copy = 0;  // Get() returns a reference of the caller's own
  SessionCache* cache = Ref::Get(SSL_get_SSL_CTX(ssl));
  return cache == nullptr ? nullptr : cache->Get(id, static_cast<unsigned int>(size));
}

void OnRemoveSession(SSL_CTX* ctx, SSL_SESSION* session) {
  if (SessionCache* cache = Ref::Get(ctx)) cache->Remove(session);
}

}  // namespace

SessionCache::~SessionCache() {
  for (auto& [id, session] : sessions_) SSL_SESSION_free(session);
}

void SessionCache::Install(SSL_CTX* ctx, std::shared_ptr<SessionCache> cache) {
  Ref::Attach(ctx, std::move(cache));
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER | SSL_SESS_CACHE_NO_INTERNAL);
  SSL_CTX_sess_set_new_cb(ctx, &OnNewSession);
  SSL_CTX_sess_set_get_cb(ctx, &OnGetSession);
  SSL_CTX_sess_set_remove_cb(ctx, &OnRemoveSession);
}

void SessionCache::Add(SSL_SESSION* session) {
  std::string id = IdOf(session);
  std::lock_guard lock(mutex_);
  auto [it, added] = sessions_.try_emplace(id, session);
  if (!added) {
    SSL_SESSION_free(it->second);
    it->second = session;
    return;
  }
  order_.push_back(std::move(id));
  while (sessions_.size() > capacity_ || order_.size() > 2 * capacity_) {
    auto oldest = sessions_.find(order_.front());
    if (oldest != sessions_.end()) {
      SSL_SESSION_free(oldest->second);
      sessions_.erase(oldest);
    }
    order_.pop_front();
  }
}

SSL_SESSION* SessionCache::Get(const unsigned char* id, unsigned int size) {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(std::string(reinterpret_cast<const char*>(id), size));
  if (it == sessions_.end()) return nullptr;
  SSL_SESSION_up_ref(it->second);
  return it->second;
}

void SessionCache::Remove(SSL_SESSION* session) {
  const std::string id = IdOf(session);
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second != session) return;
  SSL_SESSION_free(it->second);
  sessions_.erase(it);
}

}  // namespace tollgate::gateway
