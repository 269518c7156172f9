#include "rules/normalize.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tollgate::rules {
namespace {

// -1 when `c` is no hex digit.
constexpr int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

constexpr bool IsUnreserved(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

constexpr bool IsUpperHexOrDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

constexpr char kUpperHex[] = "0123456789ABCDEF";

// True when the path needs no change: one scan, stops at the first byte that
// may need work. Bytes other than '/', '%' and NUL are skipped at once.
bool IsCanonicalPath(std::string_view p) {
  const std::size_t n = p.size();
  const char* s = p.data();
  for (std::size_t i = 0; i < n; ++i) {
    const char c = s[i];
    if (c == '/') {
      if (i + 1 == n) return true;
      const char c1 = s[i + 1];
      if (c1 == '/') return false;
      if (c1 == '.') {
        // "/." or "/.." as a whole segment.
        if (i + 2 == n || s[i + 2] == '/') return false;
        if (s[i + 2] == '.' && (i + 3 == n || s[i + 3] == '/')) return false;
      }
    } else if (c == '%') {
      // Canonical escape: two upper-case hex digits, of neither an
      // unreserved character nor NUL.
      if (n - i < 3 || !IsUpperHexOrDigit(s[i + 1]) || !IsUpperHexOrDigit(s[i + 2])) return false;
      const auto v = static_cast<unsigned char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      if (v == 0 || IsUnreserved(v)) return false;
      i += 2;
    } else if (c == '\0') {
      return false;
    }
  }
  return true;
}

// Step 1: `out` = `path` with unreserved escapes decoded and the others in
// upper case.
PathStatus Decode(std::string_view path, std::string& out) {
  out.resize(path.size());  // the result is never longer
  char* w = out.data();
  const char* s = path.data();
  const std::size_t n = path.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char c = s[i];
    if (c == '%') {
      if (n - i < 3) return PathStatus::kBadEncoding;
      const int hi = HexValue(s[i + 1]);
      const int lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return PathStatus::kBadEncoding;
      const auto v = static_cast<unsigned char>(hi * 16 + lo);
      if (v == 0) return PathStatus::kNulByte;
      if (IsUnreserved(v)) {
        *w++ = static_cast<char>(v);
      } else {
        *w++ = '%';
        *w++ = kUpperHex[hi];
        *w++ = kUpperHex[lo];
      }
      i += 2;
    } else if (c == '\0') {
      return PathStatus::kNulByte;
    } else {
      *w++ = c;
    }
  }
  out.resize(static_cast<std::size_t>(w - out.data()));
  return PathStatus::kNormalized;
}

// Steps 2 and 3 in place on `out` (starts with '/'; every '/' in it is a
// separator since escapes of '/' stayed encoded). The write position never
// passes the read position, so one buffer serves.
PathStatus RemoveDotSegments(std::string& out) {
  char* b = out.data();
  const std::size_t n = out.size();
  std::size_t w = 0;  // b[0, w): the result so far, "" or "/seg/seg" (no trailing '/')
  std::size_t r = 0;  // b[r] == '/' at the top of the loop
  while (r < n) {
    std::size_t s = r;
    while (s < n && b[s] == '/') ++s;  // merge slashes
    std::size_t e = s;
    while (e < n && b[e] != '/') ++e;  // segment b[s, e)
    const std::size_t len = e - s;
    const bool last = e == n;
    if (len == 0) {
      // Only trailing slashes are left: the result ends with one.
      b[w++] = '/';
    } else if (len == 1 && b[s] == '.') {
      if (last) b[w++] = '/';
    } else if (len == 2 && b[s] == '.' && b[s + 1] == '.') {
      if (w == 0) return PathStatus::kAboveRoot;
      do --w;
      while (b[w] != '/');  // drop the last segment with its '/'
      if (last) b[w++] = '/';
    } else {
      b[w++] = '/';
      if (w != s) std::memmove(b + w, b + s, len);
      w += len;
    }
    r = e;
  }
  // The last segment always wrote something: w > 0.
  out.resize(w);
  return PathStatus::kNormalized;
}

bool IsUpperAscii(char c) { return c >= 'A' && c <= 'Z'; }

// What NormalizeHost must know of a Host's bytes: any ASCII upper-case
// letter, and two adjacent dots in the name (the first `name_end` bytes).
struct HostBytes {
  bool upper = false;
  bool dots = false;
};

// Eight bytes at a time (SWAR; a Host is short but read on every request),
// cheaper than a per-byte loop (docs/performance.md).
static_assert(std::endian::native == std::endian::little, "ScanHost reads words little-endian");
constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
constexpr std::uint64_t kLow7 = 0x7F7F7F7F7F7F7F7FULL;
constexpr std::uint64_t kHigh = 0x8080808080808080ULL;

// 0x80 in each byte of `w` equal to `c`, exactly (no borrow between bytes).
std::uint64_t BytesEqual(std::uint64_t w, char c) {
  const std::uint64_t x = w ^ (kOnes * static_cast<unsigned char>(c));
  return ~(((x & kLow7) + kLow7) | x | kLow7);
}

// 0x80 in each byte of `w` within 'A'..'Z', exactly: bytes of 0x80 and above
// are not letters.
std::uint64_t UpperBytes(std::uint64_t w) {
  const std::uint64_t low = w & kLow7;
  const std::uint64_t above_a = low + kOnes * (0x80 - 'A');      // high bit: >= 'A'
  const std::uint64_t above_z = low + kOnes * (0x80 - 'Z' - 1);  // high bit: > 'Z'
  return above_a & ~above_z & ~w & kHigh;
}

HostBytes ScanHost(std::string_view host, std::size_t name_end) {
  HostBytes out;
  std::uint64_t upper = 0;
  std::uint64_t carry_dot = 0;  // the last byte of the previous word was a '.'
  for (std::size_t i = 0; i < host.size(); i += 8) {
    const std::size_t n = std::min<std::size_t>(8, host.size() - i);
    std::uint64_t w = 0;
    std::memcpy(&w, host.data() + i, n);  // the missing bytes are NUL: neither
    upper |= UpperBytes(w);
    if (i < name_end) {
      std::uint64_t dot = BytesEqual(w, '.');
      if (name_end - i < 8) dot &= (std::uint64_t{1} << (8 * (name_end - i))) - 1;
      // Little-endian: byte k + 1 lies 8 bits above byte k.
      out.dots |= ((dot & (dot << 8)) | (carry_dot & dot & 0x80)) != 0;
      carry_dot = dot >> 56;
    }
  }
  out.upper = upper != 0;
  return out;
}

}  // namespace

namespace detail {

PathStatus NormalizePathSlow(std::string_view path, std::string& out) {
  if (path.empty() || path.front() != '/') return PathStatus::kNotAbsolute;
  const PathStatus decoded = Decode(path, out);
  if (decoded != PathStatus::kNormalized) return decoded;
  return RemoveDotSegments(out);
}

}  // namespace detail

PathStatus NormalizePath(std::string_view path, std::string& out) {
  if (path.empty() || path.front() != '/') return PathStatus::kNotAbsolute;
  if (IsCanonicalPath(path)) return PathStatus::kUnchanged;
  return detail::NormalizePathSlow(path, out);
}

HostStatus NormalizeHost(std::string_view host, std::string& out) {
  // Split "name[:port]" / "[literal][:port]"; `name_end` is where the port
  // (":...") or the end begins.
  std::size_t name_end;
  bool literal = false;
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) return HostStatus::kInvalid;
    name_end = close + 1;
    if (name_end != host.size() && host[name_end] != ':') return HostStatus::kInvalid;
    literal = true;
  } else {
    name_end = host.find(':');
    if (name_end == std::string_view::npos) name_end = host.size();
  }
  if (name_end == 0) return HostStatus::kInvalid;

  const HostBytes bytes = ScanHost(host, name_end);
  const bool upper = bytes.upper;
  const bool dots = bytes.dots;
  if (dots && !literal) return HostStatus::kInvalid;
  const bool trailing_dot = !literal && host[name_end - 1] == '.';
  if (trailing_dot && name_end == 1) return HostStatus::kInvalid;  // "." alone
  if (!upper && !trailing_dot) return HostStatus::kUnchanged;

  out.assign(host.data(), trailing_dot ? name_end - 1 : name_end);
  out.append(host.substr(name_end));
  for (char& c : out) {
    if (IsUpperAscii(c)) c = static_cast<char>(c - 'A' + 'a');
  }
  return HostStatus::kNormalized;
}

bool CanonicalPathPrefix(std::string_view prefix, std::string& out) {
  switch (NormalizePath(prefix, out)) {
    case PathStatus::kUnchanged:
      out.assign(prefix);
      return true;
    case PathStatus::kNormalized:
      return true;
    default:
      return false;
  }
}

bool CanonicalHost(std::string_view host, std::string& out) {
  switch (NormalizeHost(host, out)) {
    case HostStatus::kUnchanged:
      out.assign(host);
      return true;
    case HostStatus::kNormalized:
      return true;
    case HostStatus::kInvalid:
      return false;
  }
  return false;
}

}  // namespace tollgate::rules
