// Ties a shared object to an SSL_CTX for the SSL_CTX's whole life, for
// OpenSSL callbacks that find their object through the SSL_CTX: the
// context keeps a std::shared_ptr of it in its ex_data, released when
// OpenSSL frees the context (after the last connection that uses it, not
// when a configuration is replaced). Include from .cc files only.
#pragma once

#include <openssl/ssl.h>

#include <memory>

namespace tollgate::gateway {

template <typename T>
class SslCtxRef {
 public:
  // `ctx` holds `value` until it is freed; once per context.
  static void Attach(SSL_CTX* ctx, std::shared_ptr<T> value) {
    SSL_CTX_set_ex_data(ctx, Index(), new std::shared_ptr<T>(std::move(value)));
  }
  // The object attached to `ctx`; null: none.
  static T* Get(const SSL_CTX* ctx) {
    auto* held = static_cast<std::shared_ptr<T>*>(SSL_CTX_get_ex_data(ctx, Index()));
    return held == nullptr ? nullptr : held->get();
  }

 private:
  static void Free(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
    delete static_cast<std::shared_ptr<T>*>(ptr);
  }
  static int Index() {
    static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, &Free);
    return index;
  }
};

}  // namespace tollgate::gateway
