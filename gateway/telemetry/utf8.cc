#include "gateway/telemetry/utf8.h"

#include <cstdint>

namespace tollgate::gateway {

std::string ValidUtf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size();) {
    const auto c = static_cast<unsigned char>(in[i]);
    std::size_t len = c < 0x80         ? 1
                      : (c >> 5) == 6  ? 2
                      : (c >> 4) == 14 ? 3
                      : (c >> 3) == 30 ? 4
                                       : 0;
    bool ok = len > 0 && i + len <= in.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<unsigned char>(in[i + k]) & 0xC0) == 0x80;
    }
    if (ok && len > 1) {
      // Overlong forms and surrogates are invalid too.
      const auto c1 = static_cast<unsigned char>(in[i + 1]);
      ok = !(c == 0xC0 || c == 0xC1 || (c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) ||
             (c == 0xF0 && c1 < 0x90) || c > 0xF4 || (c == 0xF4 && c1 >= 0x90));
    }
    if (ok) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += 1;
    }
  }
  return out;
}

namespace {

enum class Escaped : std::uint8_t { kControls, kControlsQuotesAndBackslashes };

std::string Escape(std::string_view in, Escaped what) {
  std::string out;
  out.reserve(in.size());
  const auto escape = [&out](unsigned char c) {
    constexpr std::string_view kHex = "0123456789ABCDEF";
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xF];
  };
  const bool quotes = what == Escaped::kControlsQuotesAndBackslashes;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto c = static_cast<unsigned char>(in[i]);
    const bool c1 = c == 0xC2 && i + 1 < in.size() &&
                    static_cast<unsigned char>(in[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(in[i + 1]) <= 0x9F;
    if (c1) {
      escape(c);
      escape(static_cast<unsigned char>(in[++i]));
    } else if (c < 0x20 || c == 0x7F || (quotes && (c == '"' || c == '\\'))) {
      escape(c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

std::string EscapeLogText(std::string_view in) {
  return Escape(in, Escaped::kControlsQuotesAndBackslashes);
}

std::string TerminalText(std::string_view in) { return Escape(ValidUtf8(in), Escaped::kControls); }

}  // namespace tollgate::gateway
