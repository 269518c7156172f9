// What sees an upstream response on its way to the client: its head, then
// its body piece by piece as it is relayed (a body read whole is one
// piece), then its end (gateway/core/response_filter.h calls it). Set in
// Exchange::body_observer by whatever needs the response (a cost settled
// from what the response says, gateway/core/settlement.h); with none set,
// relaying costs one test of a null pointer per piece. Not told of a body
// that is cut: the exchange's error says why when it is logged. Free of
// Asio and Beast. Worker thread only.
#pragma once

#include <string_view>

namespace tollgate::gateway {

// The fields of a response head, by name.
class ResponseFields {
 public:
  // The first value of field `name` (case-insensitive), empty when absent.
  virtual std::string_view Get(std::string_view name) const = 0;

 protected:
  ~ResponseFields() = default;
};

class ResponseBodyObserver {
 public:
  virtual void OnResponseHead(unsigned status, const ResponseFields& fields) = 0;
  virtual void OnResponseBody(std::string_view piece) = 0;
  virtual void OnResponseEnd() = 0;

 protected:
  ~ResponseBodyObserver() = default;
};

}  // namespace tollgate::gateway
