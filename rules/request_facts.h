// What rules and identity need to know about a request, independent of the
// HTTP library: the gateway fills it in from its parsed message.
#pragma once

#include <string_view>

#include "rules/ip.h"

namespace tollgate::rules {

// Header lookup by case-insensitive name. Implementations are the request's
// own fields; valid for the duration of one evaluation.
class HeaderLookup {
 public:
  // The first value, or empty when absent.
  virtual std::string_view Get(std::string_view name) const = 0;
  // Every value of a repeated header joined with ", " (X-Forwarded-For).
  virtual std::string GetJoined(std::string_view name) const = 0;

 protected:
  ~HeaderLookup() = default;
};

struct RequestFacts {
  std::string_view method;
  std::string_view path;  // without the query
  std::string_view host;  // Host header as sent
  std::string_view route;
  IpAddress peer;  // the socket's remote address
  const HeaderLookup* headers = nullptr;
};

}  // namespace tollgate::rules
