// The pure parts of the check endpoint (gateway/core/check_endpoint.h):
// which targets it serves, how a check request becomes the original
// request it describes, and deny_status.
#include "gateway/core/check_endpoint.h"

#include <gtest/gtest.h>

#include <string>

namespace tollgate::gateway {
namespace {

TEST(CheckEndpoint, Targets) {
  EXPECT_TRUE(IsCheckTarget("/check"));
  EXPECT_TRUE(IsCheckTarget("/check?from=nginx"));
  EXPECT_FALSE(IsCheckTarget("/checks"));
  EXPECT_FALSE(IsCheckTarget("/check/"));
  EXPECT_FALSE(IsCheckTarget("/"));
}

// Every field of the check request as "Name: value" lines, and the
// request line before them.
std::string Describe(const http::request_header<Fields>& req) {
  std::string out = std::string(req.method_string()) + " " + std::string(req.target()) + "\n";
  for (const auto& field : req) {
    out += std::string(field.name_string()) + ": " + std::string(field.value()) + "\n";
  }
  return out;
}

http::request_header<Fields> CheckRequest() {
  http::request_header<Fields> req;
  req.method(http::verb::get);
  req.target("/check");
  req.set(http::field::host, "tollgate-decision:8081");
  return req;
}

TEST(DescribeOriginal, TheOriginalRequest) {
  auto req = CheckRequest();
  req.set("X-Original-Method", "POST");
  req.set("X-Original-URI", "/login?next=%2F");
  req.set("X-Original-Host", "shop.example");
  req.set("X-Forwarded-For", "192.0.2.7");
  req.set("X-Real-IP", "198.51.100.1");
  req.set(http::field::authorization, "Bearer t");
  EXPECT_EQ(DescribeOriginal(req), "");
  // X-Forwarded-For wins over X-Real-IP; the identity fields stay.
  EXPECT_EQ(Describe(req),
            "POST /login?next=%2F\n"
            "X-Forwarded-For: 192.0.2.7\n"
            "X-Real-IP: 198.51.100.1\n"
            "Authorization: Bearer t\n"
            "Host: shop.example\n");
}

TEST(DescribeOriginal, DefaultsAndXRealIp) {
  auto req = CheckRequest();
  req.method(http::verb::head);
  req.set("X-Original-URI", "/");
  req.set("X-Real-IP", "198.51.100.1");
  EXPECT_EQ(DescribeOriginal(req), "");
  // No X-Original-Method: GET, whatever the check's own method; no
  // X-Original-Host: the check's Host.
  EXPECT_EQ(Describe(req),
            "GET /\n"
            "Host: tollgate-decision:8081\n"
            "X-Real-IP: 198.51.100.1\n"
            "X-Forwarded-For: 198.51.100.1\n");
}

TEST(DescribeOriginal, Problems) {
  auto missing = CheckRequest();
  EXPECT_EQ(DescribeOriginal(missing),
            "the check needs X-Original-URI (or X-Forwarded-Uri): the original request's path "
            "and query");
  auto empty = CheckRequest();
  empty.set("X-Original-URI", "");
  EXPECT_EQ(DescribeOriginal(empty),
            "the check needs X-Original-URI (or X-Forwarded-Uri): the original request's path "
            "and query");
  auto absolute = CheckRequest();
  absolute.set("X-Original-URI", "http://shop.example/login");
  EXPECT_EQ(DescribeOriginal(absolute), "X-Original-URI must be a path (origin-form)");
  auto method = CheckRequest();
  method.set("X-Original-URI", "/");
  method.set("X-Original-Method", "GET /");
  EXPECT_EQ(DescribeOriginal(method), "X-Original-Method is not a method");
}

// What Traefik's forwardAuth sends (pkg/middlewares/auth/forward.go): a GET
// to the configured address with its own Host, the client's fields, and
// X-Forwarded-Method, -Proto, -Host, -Uri and -For describing the request.
TEST(DescribeOriginal, TraefikForwardAuth) {
  auto req = CheckRequest();
  req.set(http::field::user_agent, "curl/7.88.1");
  req.set(http::field::authorization, "Bearer t");
  req.set("X-Forwarded-For", "192.0.2.7");
  req.set("X-Forwarded-Method", "DELETE");
  req.set("X-Forwarded-Proto", "https");
  req.set("X-Forwarded-Host", "shop.example");
  req.set("X-Forwarded-Uri", "/api/items/3?force=1");
  EXPECT_EQ(DescribeOriginal(req), "");
  EXPECT_EQ(Describe(req),
            "DELETE /api/items/3?force=1\n"
            "User-Agent: curl/7.88.1\n"
            "Authorization: Bearer t\n"
            "X-Forwarded-For: 192.0.2.7\n"
            "X-Forwarded-Proto: https\n"
            "Host: shop.example\n");
}

// Both sets came (a client of nginx sent X-Forwarded-*, which nginx passes
// on): nginx's X-Original-* describe the request, the client's fields stay
// as fields of the original request.
TEST(DescribeOriginal, XOriginalWinsOverXForwarded) {
  auto req = CheckRequest();
  req.set("X-Original-Method", "GET");
  req.set("X-Original-URI", "/api");
  req.set("X-Original-Host", "shop.example");
  req.set("X-Forwarded-Method", "POST");
  req.set("X-Forwarded-Uri", "/free");
  req.set("X-Forwarded-Host", "other.example");
  EXPECT_EQ(DescribeOriginal(req), "");
  EXPECT_EQ(Describe(req),
            "GET /api\n"
            "X-Forwarded-Method: POST\n"
            "X-Forwarded-Uri: /free\n"
            "X-Forwarded-Host: other.example\n"
            "Host: shop.example\n");
}

// A proxy that sets only X-Original-URI passes its client's own fields on:
// the client's X-Forwarded-Method and -Host must not describe the request
// (the sets are never mixed), so the defaults apply.
TEST(DescribeOriginal, AClientsXForwardedFieldsDoNotFillInNginxsSet) {
  auto req = CheckRequest();
  req.set("X-Original-URI", "/api");
  req.set("X-Forwarded-Method", "POST");
  req.set("X-Forwarded-Host", "other.example");
  EXPECT_EQ(DescribeOriginal(req), "");
  EXPECT_EQ(Describe(req),
            "GET /api\n"
            "Host: tollgate-decision:8081\n"
            "X-Forwarded-Method: POST\n"
            "X-Forwarded-Host: other.example\n");
}

TEST(DescribeOriginal, TraefikProblemsNameTraefiksFields) {
  auto absolute = CheckRequest();
  absolute.set("X-Forwarded-Uri", "https://shop.example/");
  EXPECT_EQ(DescribeOriginal(absolute), "X-Forwarded-Uri must be a path (origin-form)");
  auto method = CheckRequest();
  method.set("X-Forwarded-Uri", "/");
  method.set("X-Forwarded-Method", "");
  EXPECT_EQ(DescribeOriginal(method), "X-Forwarded-Method is not a method");
}

TEST(DenyStatus, ReplacesEveryRefusalButABadCheck) {
  Answer limited = Refuse(Refusal::kRateLimited, 3);
  ApplyDenyStatus(403, limited);
  EXPECT_EQ(limited.Status(), 403u);
  Answer unavailable = Refuse(Refusal::kStoreUnavailable);
  ApplyDenyStatus(403, unavailable);
  EXPECT_EQ(unavailable.Status(), 403u);
  Answer bad = RefuseWith(Refusal::kBadRequest, "X-Original-URI must be a path (origin-form)");
  ApplyDenyStatus(403, bad);
  EXPECT_EQ(bad.Status(), 400u);
  Answer own = Refuse(Refusal::kRateLimited, 3);
  ApplyDenyStatus(0, own);
  EXPECT_EQ(own.Status(), 429u);
}

}  // namespace
}  // namespace tollgate::gateway
