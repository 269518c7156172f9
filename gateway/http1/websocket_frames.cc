#include "gateway/http1/websocket_frames.h"

#include <algorithm>

#include "gateway/telemetry/utf8.h"

namespace tollgate::gateway {
namespace {

constexpr std::uint8_t kContinuation = 0x0;
constexpr std::uint8_t kText = 0x1;
constexpr std::uint8_t kBinary = 0x2;
constexpr std::uint8_t kClose = 0x8;
constexpr std::uint8_t kPing = 0x9;
constexpr std::uint8_t kPong = 0xA;
constexpr std::uint8_t kRsv1 = 0x40;
constexpr std::uint8_t kRsv2And3 = 0x30;
constexpr std::size_t kMaxControlPayload = 125;

bool IsControl(std::uint8_t opcode) { return (opcode & 0x8) != 0; }

// Codes an endpoint may send (RFC 6455 §7.4.1 and the IANA registry's
// 1012-1014; 3000-4999 for libraries and applications). 1005 and 1006
// only ever describe a close, and 1015 a TLS failure: never on the wire.
bool SendableCloseCode(unsigned code) {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
         (code >= 3000 && code <= 4999);
}

// A close frame's payload (masked with `mask`): empty, or a sendable code
// and a UTF-8 reason.
bool ValidClosePayload(std::string_view masked, const std::array<std::uint8_t, 4>& mask) {
  if (masked.empty()) return true;
  if (masked.size() == 1) return false;
  std::array<char, kMaxControlPayload> payload;
  for (std::size_t i = 0; i < masked.size(); ++i) {
    payload[i] = static_cast<char>(static_cast<std::uint8_t>(masked[i]) ^ mask[i % 4]);
  }
  const unsigned code = static_cast<unsigned>(static_cast<std::uint8_t>(payload[0])) << 8 |
                        static_cast<std::uint8_t>(payload[1]);
  const std::string_view reason(payload.data() + 2, masked.size() - 2);
  return SendableCloseCode(code) && ValidUtf8(reason) == reason;
}

char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

// Inline, into the caller's Header: called per frame, and a call returning
// an optional Header cost more per message of a tunnel with a message rule
// (docs/performance.md).
inline bool FrameParser::ReadHeader(std::string_view data, Header& h) {
  if (data.size() < 2) return false;
  const auto b0 = static_cast<std::uint8_t>(data[0]);
  const auto b1 = static_cast<std::uint8_t>(data[1]);
  h.fin = (b0 & 0x80) != 0;
  h.rsv = b0 & 0x70;
  h.opcode = b0 & 0x0F;
  h.masked = (b1 & 0x80) != 0;
  const std::uint8_t length7 = b1 & 0x7F;
  const std::size_t extended = length7 == 126 ? 2 : length7 == 127 ? 8 : 0;
  h.size = 2 + extended + (h.masked ? 4 : 0);
  if (data.size() < h.size) return false;
  h.length = length7;
  if (extended > 0) {
    h.length = 0;
    for (std::size_t i = 0; i < extended; ++i) {
      h.length = h.length << 8 | static_cast<std::uint8_t>(data[2 + i]);
    }
    // RFC 6455 §5.2: "the minimal number of bytes MUST be used".
    h.minimal = extended == 2 ? h.length >= 126 : h.length > 0xFFFF;
  }
  if (h.masked) {
    for (std::size_t i = 0; i < 4; ++i)
      h.mask[i] = static_cast<std::uint8_t>(data[2 + extended + i]);
  }
  return true;
}

std::optional<FrameEvent> FrameParser::Check(const Header& h) const {
  const bool data = h.opcode == kContinuation || h.opcode == kText || h.opcode == kBinary;
  const bool known = data || h.opcode == kClose || h.opcode == kPing || h.opcode == kPong;
  const bool rsv1_allowed =
      compression_ == Compression::kPerMessageDeflate && (h.opcode == kText || h.opcode == kBinary);
  if (!known || (h.rsv & kRsv2And3) != 0 || ((h.rsv & kRsv1) != 0 && !rsv1_allowed) || !h.masked ||
      !h.minimal || (h.length >> 63) != 0) {
    return FrameEvent::kProtocolError;
  }
  if (IsControl(h.opcode)) {
    if (!h.fin || h.length > kMaxControlPayload) return FrameEvent::kProtocolError;
    return std::nullopt;
  }
  // A continuation continues a fragmented message; a text or binary frame
  // starts one only when none is under way.
  if ((h.opcode == kContinuation) != in_message_) return FrameEvent::kProtocolError;
  const std::uint64_t before = h.opcode == kContinuation ? message_bytes_ : 0;
  if (h.length > max_message_bytes_ || before > max_message_bytes_ - h.length) {
    return FrameEvent::kTooBig;
  }
  return std::nullopt;
}

FrameStep FrameParser::Parse(std::string_view data) {
  FrameStep step;
  if (failed_) {
    step.event = *failed_;
    return step;
  }
  while (step.consumed < data.size()) {
    if (payload_left_ > 0) {
      const std::uint64_t take =
          std::min<std::uint64_t>(payload_left_, data.size() - step.consumed);
      payload_left_ -= take;
      step.consumed += take;
      continue;
    }
    const std::string_view rest = data.substr(step.consumed);
    if (announced_ && rest.size() >= announced_header_.size) {
      // The data frame announced by the last call, given again from its
      // header: read and checked then, and nothing Check() reads changed.
      announced_ = false;
      step.consumed += Begin(announced_header_);
      continue;
    }
    Header h;
    if (!ReadHeader(rest, h)) return step;
    if (sender_ == FrameSender::kServer) {
      step.consumed += h.size;
      payload_left_ = h.length;
      continue;
    }
    if (const std::optional<FrameEvent> problem = Check(h)) {
      failed_ = problem;
      step.event = *problem;
      return step;
    }
    if (IsControl(h.opcode)) {
      // Passed only whole, so that a bad close payload is caught before
      // any byte of its frame has gone on.
      const std::size_t frame = h.size + static_cast<std::size_t>(h.length);
      if (rest.size() < frame) return step;
      if (h.opcode == kClose && !ValidClosePayload(rest.substr(h.size, h.length), h.mask)) {
        failed_ = FrameEvent::kProtocolError;
        step.event = FrameEvent::kProtocolError;
        return step;
      }
      step.consumed += frame;
      continue;
    }
    if (h.opcode != kContinuation) {
      announced_ = true;
      announced_header_ = h;
      step.event = FrameEvent::kMessageStart;
      return step;
    }
    step.consumed += Begin(h);
  }
  return step;
}

std::size_t FrameParser::Begin(const Header& h) {
  message_bytes_ = (h.opcode == kContinuation ? message_bytes_ : 0) + h.length;
  in_message_ = !h.fin;
  payload_left_ = h.length;
  return h.size;
}

std::string CloseFrame(CloseCode code, std::string_view reason,
                       std::optional<std::array<std::uint8_t, 4>> mask) {
  reason = reason.substr(0, kMaxControlPayload - 2);
  const auto value = static_cast<std::uint16_t>(code);
  std::string payload;
  payload += static_cast<char>(value >> 8);
  payload += static_cast<char>(value & 0xFF);
  payload += reason;
  std::string out;
  out += static_cast<char>(0x80 | kClose);
  out += static_cast<char>((mask ? 0x80 : 0x00) | payload.size());
  if (mask) {
    out.append(reinterpret_cast<const char*>(mask->data()), mask->size());
    for (std::size_t i = 0; i < payload.size(); ++i) {
      payload[i] = static_cast<char>(static_cast<std::uint8_t>(payload[i]) ^ (*mask)[i % 4]);
    }
  }
  out += payload;
  return out;
}

bool NamesPerMessageDeflate(std::string_view extensions) {
  constexpr std::string_view kName = "permessage-deflate";
  // Elements are separated by commas outside quoted parameter values; an
  // element's name ends at its first ';'.
  bool quoted = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= extensions.size(); ++i) {
    if (i < extensions.size() && extensions[i] == '"') quoted = !quoted;
    if (i < extensions.size() && (quoted || extensions[i] != ',')) continue;
    std::string_view element = extensions.substr(start, i - start);
    const std::string_view name = Trim(element.substr(0, element.find(';')));
    if (name.size() == kName.size() &&
        std::equal(name.begin(), name.end(), kName.begin(),
                   [](char a, char b) { return AsciiLower(a) == b; })) {
      return true;
    }
    start = i + 1;
  }
  return false;
}

}  // namespace tollgate::gateway
