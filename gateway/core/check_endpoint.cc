#include "gateway/core/check_endpoint.h"

#include "gateway/core/identify.h"
#include "gateway/core/request_id.h"
#include "gateway/core/gateway_state.h"

namespace tollgate::gateway {

bool IsCheckTarget(std::string_view target) {
  return target.substr(0, target.find('?')) == kCheckPath;
}

namespace {

// The fields that describe the original request: nginx's names (the
// docs/decision-service.md's auth_request setup sets them), or Traefik forwardAuth's when no
// X-Original-URI came. One set or the other, never mixed field by field:
// a proxy that sets only X-Original-URI passes the client's own
// X-Forwarded-Method/-Host on, which must not choose what is counted.
struct Names {
  std::string_view uri, method, host;
};
constexpr Names kNginx{"X-Original-URI", "X-Original-Method", "X-Original-Host"};
constexpr Names kTraefik{"X-Forwarded-Uri", "X-Forwarded-Method", "X-Forwarded-Host"};

struct Describing {
  std::string_view name;
  Fields::const_iterator field;
};
Describing Find(const http::request_header<Fields>& req, std::string_view name) {
  return {name, req.find(name)};
}

}  // namespace

std::string_view DescribeOriginal(http::request_header<Fields>& req) {
  const Names& names = req.find(kNginx.uri) != req.end() ? kNginx : kTraefik;
  const Describing uri = Find(req, names.uri);
  if (uri.field == req.end() || uri.field->value().empty()) {
    return "the check needs X-Original-URI (or X-Forwarded-Uri): the original request's path "
           "and query";
  }
  if (uri.field->value().front() != '/') {
    return uri.name == "X-Original-URI" ? "X-Original-URI must be a path (origin-form)"
                                        : "X-Forwarded-Uri must be a path (origin-form)";
  }
  const Describing method = Find(req, names.method);
  if (method.field != req.end()) {
    const std::string_view name = method.field->value();
    if (name.empty() || name.find_first_of(" \t") != std::string_view::npos) {
      return method.name == "X-Original-Method" ? "X-Original-Method is not a method"
                                                : "X-Forwarded-Method is not a method";
    }
    req.method_string(name);
  } else {
    req.method(http::verb::get);
  }
  req.target(uri.field->value());
  const Describing host = Find(req, names.host);
  if (host.field != req.end()) req.set(http::field::host, host.field->value());
  if (req.find("X-Forwarded-For") == req.end()) {
    if (const auto real_ip = req.find("X-Real-IP"); real_ip != req.end()) {
      req.set("X-Forwarded-For", real_ip->value());
    }
  }
  // The fields that described the request go; the same names from the
  // other proxy's set, when both came, were the client's and stay.
  for (const Describing& used : {uri, method, host}) {
    if (used.field != req.end()) req.erase(used.name);
  }
  return {};
}

void ApplyDenyStatus(unsigned deny_status, Answer& answer) {
  if (deny_status == 0 || answer.refusal == Refusal::kBadRequest) return;
  answer.status = deny_status;
}

Admit StartCheck(const GatewayState& state, Admission& admission, http::request_header<Fields>& req,
                 const rules::IpAddress& peer_address, const rules::ClientCertificate* client_cert,
                 std::string& canonical, Exchange& ex, Answer& answer) {
  if (!IsCheckTarget(req.target())) {
    answer = Refuse(Refusal::kNoRoute);
    return Admit::kRefused;
  }
  if (const std::string_view problem = DescribeOriginal(req); !problem.empty()) {
    answer = RefuseWith(Refusal::kBadRequest, problem);
    return Admit::kRefused;
  }
  std::string_view host = req[http::field::host];
  if (const std::string_view problem = Canonicalize(req, host, canonical); !problem.empty()) {
    answer = RefuseWith(Refusal::kBadRequest, problem);
    return Admit::kRefused;
  }
  if (!ex.method.empty()) {
    // The access log shows the request decided on.
    ex.method = req.method_string();
    ex.target = req.target();
  }
  // A decision service alone has no routes: its checks are decided by the
  // rules that name no route.
  const rules::RouteConfig* route = state.routes->Match(host, req.target());
  if (route == nullptr && !state.config->routes.empty()) {
    answer = Refuse(Refusal::kNoRoute);
    return FinishCheck(state, Admit::kRefused, answer);
  }
  std::string_view route_name;
  if (route != nullptr) {
    route_name = route->name;
    ex.route = route->name;
    ex.priority = route->priority;
    if (!state.route_ids.empty()) {
      ex.route_metric = state.route_ids[route - state.config->routes.data()];
    }
  }
  Identification who(*state.identity, req, host, route_name, peer_address, client_cert);
  return FinishCheck(state, admission.StartRequest(state, who.facts(), who.identity(), ex, answer,
                                                            BodyCost::kDefault),
                     answer);
}

Admit FinishCheck(const GatewayState& state, Admit admit, Answer& answer) {
  // (An HTTP/2 stream is taken for a check by the configuration of its
  // arrival; a reload that removed [decision] may be this exchange's.)
  if (admit == Admit::kRefused && state.config->decision) {
    ApplyDenyStatus(state.config->decision->deny_status, answer);
  }
  return admit;
}

void AppendCheckAllowedFields(const LimitOutcome& outcome, std::string_view request_id,
                              std::string& out) {
  AppendRequestIdLine(request_id, out);
  if (outcome.shown != nullptr && outcome.shown->headers == rules::RateLimitHeaders::kAll) {
    AppendRateLimitHeaders(*outcome.shown, outcome.shown_decision, out);
  }
}

void AppendCheckAllowed(const LimitOutcome& outcome, Persistence persistence,
                        std::string_view request_id, std::string& out) {
  out += "HTTP/1.1 200 OK\r\nServer: tollgate\r\nContent-Length: 0\r\n";
  AppendCheckAllowedFields(outcome, request_id, out);
  if (persistence == Persistence::kClose) out += "Connection: close\r\n";
  out += "\r\n";
}

}  // namespace tollgate::gateway
