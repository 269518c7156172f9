// The check endpoint of the decision service ([decision], /check): a proxy
// (nginx auth_request, Traefik forwardAuth, Envoy ext_authz) asks whether
// the request it holds may pass, describing it with X-Original-Method,
// X-Original-URI, X-Original-Host (else Host) or Traefik's
// X-Forwarded-Method, -Uri, -Host, and its own fields, the client's
// address in X-Forwarded-For or X-Real-IP. The request is then
// routed, identified and admitted exactly as a proxied one (the pipeline of
// gateway/core); in place of "forward" comes "answer": 200 with the
// RateLimit fields when allowed, the refusal otherwise. What is here is
// protocol-independent, the check's phases in one place; the HTTP/1.1
// adapter (gateway/http1/check.cc) and the HTTP/2 adapter
// (gateway/h2/adapter.cc, for a decision listener's non-gRPC streams)
// drive them and write the answer in their protocol. Heavy (Beast): include
// only from gateway implementation files. Thread-safe (StartCheck and
// FinishCheck use the caller's Admission, which lives on its thread).
#pragma once

#include <string>
#include <string_view>

#include "gateway/core/admission.h"
#include "gateway/core/exchange.h"
#include "gateway/core/limits.h"
#include "gateway/core/respond.h"
#include "gateway/io/io_types.h"
#include "rules/client_certificate.h"
#include "rules/ip.h"

namespace tollgate::gateway {

inline constexpr std::string_view kCheckPath = "/check";

// Whether `target` (a request to the decision listener) asks the check
// endpoint: its path is /check, with or without a query.
bool IsCheckTarget(std::string_view target);

// Turns the check request `req` into the original request it describes:
// method from X-Original-Method (else GET), target from X-Original-URI
// (path and query, origin-form; required), Host from X-Original-Host when
// present. Each X-Original-* field that is absent falls back to the name
// Traefik's forwardAuth sends (X-Forwarded-Method, X-Forwarded-Uri,
// X-Forwarded-Host; X-Forwarded-Proto is not used); an X-Original-* field
// wins when both came. X-Real-IP, when the proxy sent it without
// X-Forwarded-For, becomes X-Forwarded-For, so that identify takes the
// client's address from it when (and only when) the peer is a trusted
// proxy. The fields that described the request are removed. A problem
// (answered 400) when neither URI field came or it is not origin-form, or
// a field is malformed.
std::string_view DescribeOriginal(http::request_header<Fields>& req);

// The check's answer to a refusal: [decision] deny_status, when set, in
// place of the refusal's status (a 400 about the check request itself
// keeps its own).
void ApplyDenyStatus(unsigned deny_status, Answer& answer);

// The check's phases up to the store's decisions, for either protocol:
// the target must be /check (else 404, deny_status not applied: the proxy
// is misconfigured, no request was refused), the request becomes the one
// it describes (DescribeOriginal, then Canonicalize; 400 when either
// fails), is routed (no route: 404) and identified (peer_address and
// client_cert: the connection's) and its admission starts (`admission`,
// as Admission::StartRequest). `ex` gets the described method and target
// (when the access log recorded the check's) and the route. kRefused:
// `answer` holds the refusal, deny_status applied. kPending: the adapter
// co_awaits admission.FinishRequest with its own ClientWatch (which holds
// a delay rule's wait as for a proxied request) and passes the result
// through FinishCheck. kAdmitted: answer AppendCheckAllowed[Fields].
// `canonical` is scratch space that must outlive the exchange.
Admit StartCheck(const GatewayState& state, Admission& admission, http::request_header<Fields>& req,
                 const rules::IpAddress& peer_address, const rules::ClientCertificate* client_cert,
                 std::string& canonical, Exchange& ex, Answer& answer);
// After a pending admission: `admit`, with deny_status applied to a
// refusal in `answer`.
Admit FinishCheck(const GatewayState& state, Admit admit, Answer& answer);

// The header lines ("Name: value\r\n") of the "allowed" answer besides
// its status: X-Request-Id and the rate-limit fields of the rule `outcome`
// shows (when its headers say so).
void AppendCheckAllowedFields(const LimitOutcome& outcome, std::string_view request_id,
                              std::string& out);

// Appends the whole "allowed" answer as HTTP/1.1: 200, no body,
// AppendCheckAllowedFields.
void AppendCheckAllowed(const LimitOutcome& outcome, Persistence persistence,
                        std::string_view request_id, std::string& out);

}  // namespace tollgate::gateway
