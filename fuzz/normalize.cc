// rules/normalize.h: NormalizePath and NormalizeHost on arbitrary bytes.
// Checks what the header promises: the result is canonical (no "//", "/./",
// "/../", trailing "/." or "/..", NUL, lower-case or unreserved escapes),
// normalising it again changes nothing, and the fast path agrees with the
// full normaliser.
#include "rules/normalize.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using tollgate::rules::HostStatus;
using tollgate::rules::PathStatus;

#define FUZZ_CHECK(cond)  \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

bool IsUpperHex(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }

void CheckCanonicalPath(std::string_view p) {
  FUZZ_CHECK(!p.empty() && p.front() == '/');
  FUZZ_CHECK(p.find("//") == std::string_view::npos);
  FUZZ_CHECK(p.find("/./") == std::string_view::npos);
  FUZZ_CHECK(p.find("/../") == std::string_view::npos);
  FUZZ_CHECK(!p.ends_with("/.") && !p.ends_with("/.."));
  FUZZ_CHECK(p.find('\0') == std::string_view::npos);
  for (std::size_t i = p.find('%'); i != std::string_view::npos; i = p.find('%', i + 1)) {
    FUZZ_CHECK(i + 2 < p.size() && IsUpperHex(p[i + 1]) && IsUpperHex(p[i + 2]));
    const int v = std::stoi(std::string(p.substr(i + 1, 2)), nullptr, 16);
    const bool unreserved = (v >= 'a' && v <= 'z') || (v >= 'A' && v <= 'Z') ||
                            (v >= '0' && v <= '9') || v == '-' || v == '.' || v == '_' || v == '~';
    FUZZ_CHECK(v != 0 && !unreserved);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  static std::string out, slow, again;

  const PathStatus s = tollgate::rules::NormalizePath(in, out);
  const PathStatus full = tollgate::rules::detail::NormalizePathSlow(in, slow);
  if (tollgate::rules::IsPathError(s)) {
    FUZZ_CHECK(full == s);
  } else {
    FUZZ_CHECK(full == PathStatus::kNormalized);
    const std::string_view result = s == PathStatus::kUnchanged ? in : std::string_view(out);
    FUZZ_CHECK(slow == result);
    FUZZ_CHECK((s == PathStatus::kUnchanged) == (slow == in));
    CheckCanonicalPath(result);
    FUZZ_CHECK(tollgate::rules::NormalizePath(result, again) == PathStatus::kUnchanged);
  }

  const HostStatus h = tollgate::rules::NormalizeHost(in, out);
  if (h != HostStatus::kInvalid) {
    const std::string_view result = h == HostStatus::kUnchanged ? in : std::string_view(out);
    FUZZ_CHECK(h == HostStatus::kUnchanged || result != in);
    for (char c : result) FUZZ_CHECK(!(c >= 'A' && c <= 'Z'));
    FUZZ_CHECK(tollgate::rules::NormalizeHost(result, again) == HostStatus::kUnchanged);
  }
  return 0;
}
