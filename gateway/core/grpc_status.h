// A gRPC call ended by tollgate itself: the trailers-only response (gRPC
// over HTTP/2) that carries its status, for every place that answers one
// (the HTTP/2 adapter's refusals, the decision service's RLS call). Heavy
// (Beast): gateway implementation files only.
#pragma once

#include <string>
#include <string_view>

#include "gateway/io/net.h"

namespace tollgate::gateway {

// Sets `head` as a trailers-only response: status 200, Content-Type
// application/grpc, grpc-status and grpc-message (`encoded_message`,
// percent-encoded already: AppendGrpcPercentEncoded).
inline void SetGrpcTrailersOnly(http::response_header<Fields>& head, int grpc_status,
                                std::string_view encoded_message) {
  head.result(http::status::ok);
  head.set(http::field::content_type, "application/grpc");
  head.set("grpc-status", std::to_string(grpc_status));
  head.set("grpc-message", encoded_message);
}

}  // namespace tollgate::gateway
