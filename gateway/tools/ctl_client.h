// The HTTP exchange of `tollgate ctl` with an admin listener: one request
// on a new connection, within a deadline. Blocking (it runs its own
// io_context); for the command line only.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tollgate::gateway {

struct AdminCall {
  std::string host;  // the admin listener
  std::uint16_t port = 9090;
  std::string method = "GET";
  std::string target;  // path and query, percent-encoded
  std::string token;   // empty: no Authorization field
  std::string body;    // JSON, for PUT
};

struct AdminReply {
  unsigned status = 0;  // 0: no answer (`error` says why)
  std::string body;
  std::string error;
};

inline constexpr std::chrono::seconds kAdminCallTimeout{10};

// Connects, sends `call`, reads the response; everything within
// kAdminCallTimeout.
AdminReply CallAdmin(const AdminCall& call);

}  // namespace tollgate::gateway
