// The check endpoint of the decision service ([decision], /check): a proxy
// (nginx auth_request, Traefik forwardAuth, Envoy ext_authz) asks whether
// the request it holds may pass, describing it with X-Original-Method,
// X-Original-URI, X-Original-Host (else Host) and its own fields, the
// client's address in X-Forwarded-For or X-Real-IP. The request is then
// routed, identified and admitted exactly as a proxied one (the pipeline of
// gateway/core); in place of "forward" comes "answer": 200 with the
// RateLimit fields when allowed, the refusal otherwise. What is here is
// protocol-independent; the HTTP/1.1 adapter (gateway/http1/check.cc)
// drives it. Heavy (Beast): include only from gateway implementation files.
// Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "gateway/core/limits.h"
#include "gateway/core/respond.h"
#include "gateway/io/io_types.h"

namespace tollgate::gateway {

inline constexpr std::string_view kCheckPath = "/check";

// Whether `target` (a request to the decision listener) asks the check
// endpoint: its path is /check, with or without a query.
bool IsCheckTarget(std::string_view target);

// Turns the check request `req` into the original request it describes:
// method from X-Original-Method (else GET), target from X-Original-URI
// (path and query, origin-form; required), Host from X-Original-Host when
// present. X-Real-IP, when the proxy sent it without X-Forwarded-For,
// becomes X-Forwarded-For, so that identify takes the client's address from
// it when (and only when) the peer is a trusted proxy. The X-Original-*
// fields are removed. A problem (answered 400) when X-Original-URI is
// missing or not origin-form, or a field is malformed.
std::string_view DescribeOriginal(http::request_header<Fields>& req);

// The check's answer to a refusal: [decision] deny_status, when set, in
// place of the refusal's status (a 400 about the check request itself
// keeps its own).
void ApplyDenyStatus(unsigned deny_status, Answer& answer);

// Appends the whole "allowed" answer: 200, no body, the rate-limit fields
// of the rule `outcome` shows (when its headers say so).
void AppendCheckAllowed(const LimitOutcome& outcome, Persistence persistence, std::string& out);

}  // namespace tollgate::gateway
