// Path and Host normalisation: non-canonical paths that would pass
// path_prefix rules (`/%61pi/x`, `//api/x`, ...), the choices documented in
// rules/normalize.h, idempotence and the fast path's agreement with the full
// normaliser on generated inputs.
#include "rules/normalize.h"

#include <gtest/gtest.h>

#include <cctype>
#include <random>
#include <string>

namespace tollgate::rules {
namespace {

using namespace std::string_view_literals;

// The normalised path, "(unchanged)" prefixed to the input when the fast
// path kept it, or the error's name.
std::string Path(std::string_view in) {
  std::string out = "(untouched)";
  switch (NormalizePath(in, out)) {
    case PathStatus::kUnchanged:
      EXPECT_EQ(out, "(untouched)") << in;
      return std::string(in);
    case PathStatus::kNormalized:
      EXPECT_NE(out, in);
      return out;
    case PathStatus::kNotAbsolute:
      return "NotAbsolute";
    case PathStatus::kBadEncoding:
      return "BadEncoding";
    case PathStatus::kNulByte:
      return "NulByte";
    case PathStatus::kAboveRoot:
      return "AboveRoot";
  }
  return "?";
}

bool Unchanged(std::string_view in) {
  std::string out;
  return NormalizePath(in, out) == PathStatus::kUnchanged;
}

std::string Host(std::string_view in) {
  std::string out = "(untouched)";
  switch (NormalizeHost(in, out)) {
    case HostStatus::kUnchanged:
      EXPECT_EQ(out, "(untouched)") << in;
      return std::string(in);
    case HostStatus::kNormalized:
      EXPECT_NE(out, in);
      return out;
    case HostStatus::kInvalid:
      return "Invalid";
  }
  return "?";
}

TEST(NormalizePath, IssueExamples) {
  EXPECT_EQ(Path("/%61pi/x"), "/api/x");
  EXPECT_EQ(Path("//api/x"), "/api/x");
  EXPECT_EQ(Path("//api//x"), "/api/x");
  EXPECT_EQ(Path("/./api/x"), "/api/x");
  EXPECT_EQ(Path("/x/../api/x"), "/api/x");
  EXPECT_EQ(Path("/api/x/."), "/api/x/");
  EXPECT_EQ(Path("/api/x/.."), "/api/");
  EXPECT_EQ(Path("/%2e%2e/x"), "AboveRoot");
  EXPECT_EQ(Path("/%2E%2E/x"), "AboveRoot");
  EXPECT_EQ(Path("/../x"), "AboveRoot");
  EXPECT_EQ(Path("/a/%2F/b"), "/a/%2F/b");
  EXPECT_TRUE(Unchanged("/a/%2F/b"));
  EXPECT_EQ(Path("/a/%2f/b"), "/a/%2F/b");
  EXPECT_EQ(Path("/a%00"), "NulByte");
  EXPECT_EQ(Path(std::string_view("/a\0b", 4)), "NulByte");
  EXPECT_EQ(Path("/%zz"), "BadEncoding");
  EXPECT_EQ(Path("/a%2"), "BadEncoding");
  EXPECT_EQ(Path("/a%"), "BadEncoding");
  EXPECT_EQ(Path("/a%g0"), "BadEncoding");
  EXPECT_EQ(Path("/a%0g"), "BadEncoding");
}

TEST(NormalizePath, CanonicalPathsTakeTheFastPath) {
  for (std::string_view p : {"/", "/api", "/api/", "/api/x", "/api/x.json", "/.well-known/a",
                             "/a/.../b", "/a/..b/.c/c./c..", "/%C3%A9t%C3%A9", "/a%20b", "/a%2Fb",
                             "/a%25", "/a\\..\\b", "/a;b=c/d:e@f", "/~u_s-e.r"}) {
    EXPECT_TRUE(Unchanged(p)) << p;
  }
}

TEST(NormalizePath, Decoding) {
  // Exactly the unreserved characters are decoded...
  EXPECT_EQ(Path("/%41%5A%61%7A%30%39%2D%2E%5F%7E"), "/AZaz09-._~");
  // ...the rest stays encoded, in upper case.
  EXPECT_EQ(Path("/%c3%a9"), "/%C3%A9");
  EXPECT_EQ(Path("/%3f%23%25%20%2b%5c"), "/%3F%23%25%20%2B%5C");
  // No double decoding: "%2561" is "%25" then "61".
  EXPECT_EQ(Path("/%2561"), "/%2561");
  EXPECT_EQ(Path("/%25%36%31"), "/%2561");
}

TEST(NormalizePath, DotSegments) {
  EXPECT_EQ(Path("/."), "/");
  EXPECT_EQ(Path("/.."), "AboveRoot");
  EXPECT_EQ(Path("/a/.."), "/");
  EXPECT_EQ(Path("/a/../.."), "AboveRoot");
  EXPECT_EQ(Path("/a/../../b"), "AboveRoot");
  EXPECT_EQ(Path("/a/b/../../c"), "/c");
  EXPECT_EQ(Path("/a/./b/./"), "/a/b/");
  EXPECT_EQ(Path("/a/b/c/./../../g"), "/a/g");  // RFC 3986 §5.4.1
  EXPECT_EQ(Path("/a/%2E/b"), "/a/b");
  EXPECT_EQ(Path("/a/.%2e/b"), "/b");
  EXPECT_EQ(Path("/a/%2E./b"), "/b");
  // Not dot segments.
  EXPECT_EQ(Path("/a/.../b"), "/a/.../b");
  EXPECT_EQ(Path("/a/.b/..c"), "/a/.b/..c");
  // Encoded slashes are no separators: "..%2F" is an ordinary segment.
  EXPECT_EQ(Path("/x/..%2Fapi"), "/x/..%2Fapi");
  EXPECT_EQ(Path("/x%2F..%2Fapi/y"), "/x%2F..%2Fapi/y");
  // Backslash is an ordinary byte.
  EXPECT_EQ(Path("/a\\..\\b"), "/a\\..\\b");
}

TEST(NormalizePath, Slashes) {
  EXPECT_EQ(Path("//"), "/");
  EXPECT_EQ(Path("///a"), "/a");
  EXPECT_EQ(Path("/a///b//"), "/a/b/");
  EXPECT_EQ(Path("/a/"), "/a/");
  EXPECT_EQ(Path("//./..//"), "AboveRoot");
  EXPECT_EQ(Path("/a//..//b"), "/b");
}

TEST(NormalizePath, NotAbsolute) {
  EXPECT_EQ(Path(""), "NotAbsolute");
  EXPECT_EQ(Path("*"), "NotAbsolute");
  EXPECT_EQ(Path("a/b"), "NotAbsolute");
  EXPECT_EQ(Path("%2Fa"), "NotAbsolute");
}

TEST(NormalizePath, ReusesTheCallersString) {
  std::string out;
  out.reserve(256);
  const char* buffer = out.data();
  ASSERT_EQ(NormalizePath("/a/./b", out), PathStatus::kNormalized);
  EXPECT_EQ(out, "/a/b");
  ASSERT_EQ(NormalizePath("//c", out), PathStatus::kNormalized);
  EXPECT_EQ(out, "/c");  // assigned, not appended
  EXPECT_EQ(out.data(), buffer);
}

// Paths built from the pieces that matter, so that most of them need work.
std::string RandomPath(std::mt19937& rng) {
  static constexpr std::string_view kPieces[] = {
      "/",   "/",   "//",  ".",   "..",  "a",   "B",  "%2e",  "%2E", "%2f", "%2F", "%61",
      "%41", "%7e", "%25", "%c3", "%00", "%",   "%2", "%zz",  "\\",  "~",   "-",   "_",
      ".a",  "a.",  "...", "%5C", "?",   "%3f", ";",  "\0"sv, "x%",  "%a",  "/.",  "/.."};
  std::uniform_int_distribution<std::size_t> piece(0, std::size(kPieces) - 1);
  std::uniform_int_distribution<int> count(0, 12);
  std::string p = "/";
  for (int i = count(rng); i > 0; --i) {
    p += kPieces[piece(rng)];
  }
  return p;
}

// The documented properties of a normalised path.
void ExpectCanonical(std::string_view p) {
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p.front(), '/') << p;
  EXPECT_EQ(p.find("//"), std::string_view::npos) << p;
  EXPECT_EQ(p.find("/./"), std::string_view::npos) << p;
  EXPECT_EQ(p.find("/../"), std::string_view::npos) << p;
  EXPECT_FALSE(p.ends_with("/.") || p.ends_with("/..")) << p;
  EXPECT_EQ(p.find('\0'), std::string_view::npos) << p;
  for (std::size_t i = p.find('%'); i != std::string_view::npos; i = p.find('%', i + 1)) {
    ASSERT_LE(i + 3, p.size()) << p;
    for (char c : p.substr(i + 1, 2)) EXPECT_TRUE(std::isdigit(c) || (c >= 'A' && c <= 'F')) << p;
    const std::string hex(p.substr(i + 1, 2));
    const int v = std::stoi(hex, nullptr, 16);
    EXPECT_FALSE(v == 0 || std::isalnum(v) || v == '-' || v == '.' || v == '_' || v == '~') << p;
  }
}

TEST(NormalizePath, IdempotentAndFastPathAgrees) {
  std::mt19937 rng(26);
  int normalized = 0, unchanged = 0, errors = 0;
  std::string out, again, slow;
  for (int i = 0; i < 200'000; ++i) {
    const std::string in = RandomPath(rng);
    const PathStatus s = NormalizePath(in, out);
    const PathStatus full = detail::NormalizePathSlow(in, slow);
    if (IsPathError(s)) {
      ++errors;
      EXPECT_EQ(full, s) << in;
      continue;
    }
    ASSERT_EQ(full, PathStatus::kNormalized) << in;
    const std::string_view result = s == PathStatus::kUnchanged ? std::string_view(in) : out;
    // The fast path says "unchanged" exactly when the full normaliser
    // returns the input.
    EXPECT_EQ(s == PathStatus::kUnchanged, slow == in) << in;
    EXPECT_EQ(slow, result) << in;
    ExpectCanonical(result);
    // Normalising twice is normalising once.
    EXPECT_EQ(NormalizePath(result, again), PathStatus::kUnchanged) << in << " -> " << result;
    (s == PathStatus::kUnchanged ? unchanged : normalized)++;
  }
  // The generator reaches every outcome.
  EXPECT_GT(normalized, 10'000);
  EXPECT_GT(unchanged, 1'000);
  EXPECT_GT(errors, 10'000);
}

TEST(NormalizeHost, IssueExamples) {
  EXPECT_EQ(Host("API.Example.COM."), "api.example.com");
  EXPECT_EQ(Host("api.example.com."), "api.example.com");
  EXPECT_EQ(Host("api.example.com.:8080"), "api.example.com:8080");
  EXPECT_EQ(Host("[::1]:80"), "[::1]:80");
  EXPECT_EQ(Host("[::1]"), "[::1]");
  EXPECT_EQ(Host("[FE80::1]:8080"), "[fe80::1]:8080");
}

TEST(NormalizeHost, Choices) {
  for (std::string_view h : {"api.example.com", "api.example.com:8080", "localhost", "1.2.3.4:80",
                             "[::1]", "[fe80::1]:443", ".a"}) {
    EXPECT_EQ(Host(h), h);
  }
  EXPECT_EQ(Host("1.2.3.4."), "1.2.3.4");
  EXPECT_EQ(Host("a.:"), "a:");
  // One trailing dot only; two in a row are no host name (nginx: 400).
  EXPECT_EQ(Host("a.."), "Invalid");
  EXPECT_EQ(Host("a..b"), "Invalid");
  EXPECT_EQ(Host("A..B:80"), "Invalid");
  EXPECT_EQ(Host(""), "Invalid");
  EXPECT_EQ(Host("."), "Invalid");
  EXPECT_EQ(Host(".:80"), "Invalid");
  EXPECT_EQ(Host(":80"), "Invalid");
  EXPECT_EQ(Host("[::1"), "Invalid");
  EXPECT_EQ(Host("[::1]x"), "Invalid");
  EXPECT_EQ(Host("[::1]80"), "Invalid");
  // Dots inside a literal are not the name's.
  EXPECT_EQ(Host("[::ffff:1.2.3.4]"), "[::ffff:1.2.3.4]");
}

// The word-at-a-time scan against the byte-at-a-time definition, on hosts of
// every length up to 40 with any bytes (upper-case letters and dots at word
// boundaries, bytes above 0x7F): the same status and output.
TEST(NormalizeHost, AgreesWithAByteByByteScan) {
  const auto model = [](std::string_view host, std::string& out) {
    std::size_t name_end = host.find(':');
    bool literal = false;
    if (!host.empty() && host.front() == '[') {
      const std::size_t close = host.find(']');
      if (close == std::string_view::npos) return HostStatus::kInvalid;
      name_end = close + 1;
      if (name_end != host.size() && host[name_end] != ':') return HostStatus::kInvalid;
      literal = true;
    } else if (name_end == std::string_view::npos) {
      name_end = host.size();
    }
    if (name_end == 0) return HostStatus::kInvalid;
    bool upper = false;
    for (const char c : host) upper |= c >= 'A' && c <= 'Z';
    const bool dots = host.substr(0, name_end).find("..") != std::string_view::npos;
    if (dots && !literal) return HostStatus::kInvalid;
    const bool trailing_dot = !literal && host[name_end - 1] == '.';
    if (trailing_dot && name_end == 1) return HostStatus::kInvalid;
    if (!upper && !trailing_dot) return HostStatus::kUnchanged;
    out.assign(host.substr(0, trailing_dot ? name_end - 1 : name_end));
    out.append(host.substr(name_end));
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return HostStatus::kNormalized;
  };
  std::mt19937 rng(27);
  static constexpr char kBytes[] = {'a', 'Z', 'A', '@', '[', '.', '.', ':', '0', '\x80',
                                    '\xC1', '\xDA', '\xFF', 'z', '`', '{'};
  std::uniform_int_distribution<std::size_t> byte(0, std::size(kBytes) - 1);
  std::uniform_int_distribution<int> length(1, 40);
  std::string got, want;
  for (int i = 0; i < 200'000; ++i) {
    std::string in;
    for (int k = length(rng); k > 0; --k) in += kBytes[byte(rng)];
    const HostStatus expected = model(in, want);
    ASSERT_EQ(NormalizeHost(in, got), expected) << in;
    if (expected == HostStatus::kNormalized) {
      ASSERT_EQ(got, want) << in;
    }
  }
}

TEST(NormalizeHost, Idempotent) {
  std::mt19937 rng(26);
  static constexpr std::string_view kPieces[] = {"a", "Z", ".", ":", "[", "]", "8", "::1", "X."};
  std::uniform_int_distribution<std::size_t> piece(0, std::size(kPieces) - 1);
  std::uniform_int_distribution<int> count(0, 8);
  std::string out, again;
  for (int i = 0; i < 100'000; ++i) {
    std::string in;
    for (int k = count(rng); k > 0; --k) in += kPieces[piece(rng)];
    const HostStatus s = NormalizeHost(in, out);
    if (s == HostStatus::kInvalid) continue;
    const std::string_view result = s == HostStatus::kUnchanged ? std::string_view(in) : out;
    EXPECT_EQ(NormalizeHost(result, again), HostStatus::kUnchanged) << in << " -> " << result;
    for (char c : result) EXPECT_FALSE(c >= 'A' && c <= 'Z') << in;
  }
}

}  // namespace
}  // namespace tollgate::rules
