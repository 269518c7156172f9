// The session ticket keys of one TLS listener (TLS 1.3 tickets and TLS 1.2
// RFC 5077 tickets): shared by the listener's SSL_CTXs on every worker
// thread and carried from one configuration to the next, so a ticket
// issued by any thread resumes on any other, and after a reload. Either
// generated and rotated (a new key encrypts every `rotation`, the one
// before still decrypts for one more rotation), or read from files in
// nginx's ssl_session_ticket_key format, shared by several gateways behind
// one balancer (the first encrypts, all decrypt). Thread-safe: a mutex
// around the keys, taken once per ticket issued or presented.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace tollgate::gateway {

class TicketKeys {
 public:
  struct Key {
    std::array<unsigned char, 16> name{};
    std::array<unsigned char, 32> aes{};   // AES-256-CBC, or AES-128-CBC (first 16 bytes)
    std::array<unsigned char, 32> hmac{};  // HMAC-SHA256 key (16 bytes with AES-128)
    bool aes256 = true;
    // Generated keys: the clock time it began to encrypt, and stopped (0:
    // it still does).
    std::int64_t created_ms = 0;
    std::int64_t retired_ms = 0;
  };

  // Generated keys rotated every `rotation_ms` of `clock` (which must
  // outlive this); `previous` (may be null), the listener's keys so far,
  // go on decrypting their tickets.
  static std::shared_ptr<TicketKeys> Generated(std::int64_t rotation_ms, const store::Clock& clock,
                                               const TicketKeys* previous);
  // Keys from nginx-format files: 80 bytes (name, HMAC key, AES-256 key) or
  // 48 bytes (name, AES-128 key, HMAC key). nullptr with `error` set when
  // one cannot be read.
  static std::shared_ptr<TicketKeys> FromFiles(const std::vector<std::string>& files,
                                               const store::Clock& clock, std::string& error);

  // Makes `ctx` issue and accept tickets with `keys` (kept alive by ctx).
  static void Install(SSL_CTX* ctx, std::shared_ptr<TicketKeys> keys);

  bool generated() const { return rotation_ms_ > 0; }
  std::int64_t rotation_ms() const { return rotation_ms_; }
  // The key that encrypts new tickets (rotating first when due).
  Key Current();
  // The key named `name`, rotating first when due; false when none (the
  // ticket was made with a key retired too long ago, or elsewhere).
  // `current`: whether it is the one new tickets get.
  bool Find(const unsigned char* name, Key& key, bool& current);

 private:
  TicketKeys(std::int64_t rotation_ms, const store::Clock& clock)
      : rotation_ms_(rotation_ms), clock_(clock) {}
  // With the mutex held.
  void RotateIfDue();

  const std::int64_t rotation_ms_;  // 0: keys from files, never rotated
  const store::Clock& clock_;
  mutable std::mutex mutex_;
  std::vector<Key> keys_;  // the current (encrypting) one first
};

}  // namespace tollgate::gateway
