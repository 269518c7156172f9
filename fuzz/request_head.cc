// The request head as the gateway reads it (gateway/http1/connection.cc): Beast's
// request parser with the gateway's allocator and default limits, fed the
// input in two pieces (the first byte says where to cut, as a network would),
// then what gateway/core/http_util.cc does with a parsed head: CheckRequestHeader
// (Host validity, target form, Transfer-Encoding; IsValidHost through it),
// the absolute-form rewrite, PrepareForwardedRequest and AppendWireHeader;
// and rules/normalize.h on the resulting path and Host.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/core/http_util.h"
#include "gateway/io/wire_header.h"
#include "gateway/io/io_types.h"
#include "rules/normalize.h"

namespace {

namespace gw = tollgate::gateway;
namespace http = gw::http;
using HeadParser = gw::RequestParser<http::empty_body>;

#define FUZZ_CHECK(cond)  \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

// The defaults of [limits] (rules/config.h).
constexpr std::uint32_t kMaxHeaderBytes = 16'384;
constexpr std::uint64_t kMaxBodyBytes = 10'485'760;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return -1;
  const std::size_t cut = 1 + data[0] % (size);  // 1..size
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string_view first = input.substr(0, cut - 1);

  HeadParser head;
  head.header_limit(kMaxHeaderBytes);
  head.body_limit(kMaxBodyBytes);
  // The gateway puts what it has read and reads more on need_more.
  gw::ErrorCode ec;
  std::string buffer(first);
  for (int piece = 0; piece < 2; ++piece) {
    if (piece == 1) buffer.append(input.substr(first.size()));
    while (!buffer.empty() && !head.is_header_done()) {
      ec = {};
      const std::size_t used = head.put(boost::asio::buffer(buffer), ec);
      buffer.erase(0, used);
      if (ec) break;
    }
    if (ec && ec != http::error::need_more) return 0;  // answered 400, 413 or 431
  }
  if (!head.is_header_done()) return 0;

  auto& req = head.get();
  const gw::RequestHeaderCheck check = gw::CheckRequestHeader(req, head.chunked());
  if (!check.problem.empty()) return 0;
  std::string_view host = check.host;
  if (!check.origin_form.empty()) {
    FUZZ_CHECK(check.origin_form.front() == '/');
    req.set(http::field::host, check.authority);
    req.target(check.origin_form);
    host = req[http::field::host];
  }

  const std::string_view target = req.target();
  std::string normal, again;
  if (!target.empty() && target.front() == '/') {
    const std::string_view path = target.substr(0, target.find('?'));
    const auto s = tollgate::rules::NormalizePath(path, normal);
    if (s == tollgate::rules::PathStatus::kNormalized) {
      FUZZ_CHECK(tollgate::rules::NormalizePath(normal, again) ==
                 tollgate::rules::PathStatus::kUnchanged);
    }
  }
  if (!host.empty()) (void)tollgate::rules::NormalizeHost(host, normal);

  gw::PrepareForwardedRequest(req, "203.0.113.7", gw::Scheme::kHttp);
  std::string wire;
  gw::AppendWireHeader(req, wire);
  FUZZ_CHECK(wire.size() >= 4 && std::string_view(wire).ends_with("\r\n\r\n"));
  return 0;
}
