#include "gateway/io/ticket_keys.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "gateway/io/ssl_ctx_ref.h"

namespace tollgate::gateway {
namespace {

using Ref = SslCtxRef<TicketKeys>;

// AES-`bits`-CBC fetched once for the process. EVP_aes_256_cbc()'s
// legacy object would make OpenSSL 3 fetch the provider's implementation
// by name again in every EVP_EncryptInit_ex/EVP_DecryptInit_ex, twice per
// resumed handshake (docs/performance.md).
const EVP_CIPHER* FetchedCipher(int bits) {
  static EVP_CIPHER* const aes128 = EVP_CIPHER_fetch(nullptr, "AES-128-CBC", nullptr);
  static EVP_CIPHER* const aes256 = EVP_CIPHER_fetch(nullptr, "AES-256-CBC", nullptr);
  return bits == 256 ? aes256 : aes128;
}

// OpenSSL's session ticket key callback (SSL_CTX_set_tlsext_ticket_key_evp_cb):
// `enc` 1 sets up a new ticket's encryption; 0 finds the key of a ticket
// presented (0: unknown, a full handshake; 1: resume; 2: resume and issue
// a fresh ticket).
int OnTicketKey(SSL* ssl, unsigned char* name, unsigned char* iv, EVP_CIPHER_CTX* cipher,
                EVP_MAC_CTX* mac, int enc) {
  TicketKeys* keys = Ref::Get(SSL_get_SSL_CTX(ssl));
  if (keys == nullptr) return -1;
  TicketKeys::Key key;
  bool current = true;
  if (enc == 1) {
    key = keys->Current();
    std::memcpy(name, key.name.data(), key.name.size());
  } else if (!keys->Find(name, key, current)) {
    return 0;
  }
  const EVP_CIPHER* aes = key.aes256 ? FetchedCipher(256) : FetchedCipher(128);
  if (aes == nullptr) return -1;
  const std::size_t key_size = key.aes256 ? 32 : 16;
  if (enc == 1 && RAND_bytes(iv, EVP_CIPHER_get_iv_length(aes)) != 1) return -1;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key.hmac.data(), key_size),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_END};
  const int ok = enc == 1 ? EVP_EncryptInit_ex(cipher, aes, nullptr, key.aes.data(), iv)
                          : EVP_DecryptInit_ex(cipher, aes, nullptr, key.aes.data(), iv);
  OPENSSL_cleanse(&key, sizeof(key));
  if (ok != 1 || EVP_MAC_CTX_set_params(mac, params) != 1) return -1;
  if (enc == 1) return 1;
  // 2 asks OpenSSL for a new ticket. A TLS 1.3 resumption gets one only
  // when asked (as nginx does, always): a client that used its ticket has
  // none left, and without one every other connection of it was a full
  // handshake. A TLS 1.2 ticket goes on resuming; it is renewed when made
  // with a retired key.
  return current && SSL_version(ssl) != TLS1_3_VERSION ? 1 : 2;
}

}  // namespace

std::shared_ptr<TicketKeys> TicketKeys::Generated(std::int64_t rotation_ms,
                                                  const store::Clock& clock,
                                                  const TicketKeys* previous) {
  auto keys = std::shared_ptr<TicketKeys>(
      new TicketKeys(std::max<std::int64_t>(1, rotation_ms), clock));
  if (previous != nullptr && previous->generated()) {
    std::lock_guard lock(previous->mutex_);
    keys->keys_ = previous->keys_;
  }
  return keys;
}

std::shared_ptr<TicketKeys> TicketKeys::FromFiles(const std::vector<std::string>& files,
                                                  const store::Clock& clock, std::string& error) {
  auto keys = std::shared_ptr<TicketKeys>(new TicketKeys(0, clock));
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) {
      error = "cannot read session ticket key \"" + file + "\"";
      return nullptr;
    }
    Key key;
    const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
    // nginx's layouts (ngx_ssl_session_ticket_keys).
    if (bytes.size() == 80) {
      std::copy(b, b + 16, key.name.begin());
      std::copy(b + 16, b + 48, key.hmac.begin());
      std::copy(b + 48, b + 80, key.aes.begin());
    } else if (bytes.size() == 48) {
      key.aes256 = false;
      std::copy(b, b + 16, key.name.begin());
      std::copy(b + 16, b + 32, key.aes.begin());
      std::copy(b + 32, b + 48, key.hmac.begin());
    } else {
      error = "session ticket key \"" + file + "\" must have 48 or 80 bytes";
      return nullptr;
    }
    keys->keys_.push_back(key);
  }
  return keys;
}

void TicketKeys::Install(SSL_CTX* ctx, std::shared_ptr<TicketKeys> keys) {
  Ref::Attach(ctx, std::move(keys));
  SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, &OnTicketKey);
}

void TicketKeys::RotateIfDue() {
  if (!generated()) return;
  const std::int64_t now = clock_.NowMs();
  if (keys_.empty() || now - keys_.front().created_ms >= rotation_ms_) {
    if (!keys_.empty()) keys_.front().retired_ms = now;
    Key key;
    RAND_bytes(key.name.data(), static_cast<int>(key.name.size()));
    RAND_bytes(key.aes.data(), static_cast<int>(key.aes.size()));
    RAND_bytes(key.hmac.data(), static_cast<int>(key.hmac.size()));
    key.created_ms = now;
    keys_.insert(keys_.begin(), key);
  }
  // A ticket lives one rotation (the session timeout): a key retired that
  // long ago has nothing left to decrypt.
  for (auto it = keys_.begin(); it != keys_.end();) {
    if (it->retired_ms != 0 && now - it->retired_ms >= rotation_ms_) {
      OPENSSL_cleanse(&*it, sizeof(Key));
      it = keys_.erase(it);
    } else {
      ++it;
    }
  }
}

TicketKeys::Key TicketKeys::Current() {
  std::lock_guard lock(mutex_);
  RotateIfDue();
  return keys_.front();
}

bool TicketKeys::Find(const unsigned char* name, Key& key, bool& current) {
  std::lock_guard lock(mutex_);
  RotateIfDue();
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (std::memcmp(keys_[i].name.data(), name, keys_[i].name.size()) == 0) {
      key = keys_[i];
      current = i == 0;
      return true;
    }
  }
  return false;
}

}  // namespace tollgate::gateway
