// WebSocket frames (RFC 6455 §5) as a tunnel sees them pass, for message-rate
// limits: where each frame and each data message starts, whether a client's
// frames keep the protocol, and the close frames tollgate itself sends.
// Pure: no I/O, Asio or Beast; the bytes are never copied or changed.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate::gateway {

// Close codes tollgate sends (RFC 6455 §7.4.1, and 1013 of the IANA
// registry).
enum class CloseCode : std::uint16_t {
  kProtocolError = 1002,
  kPolicyViolation = 1008,  // rate_limited
  kMessageTooBig = 1009,
  kTryAgainLater = 1013,  // the rate-limit store could not decide
};

// Who writes the frames a parser follows.
enum class FrameSender : std::uint8_t {
  // The client: every frame is checked (masked, known opcodes, RSV bits,
  // control frames, fragments, close payloads) and its data messages are
  // counted and measured.
  kClient,
  // The upstream: its frames are only followed, to know where each ends;
  // nothing is checked or reported.
  kServer,
};

// Whether RSV1 may be set: only on the first frame of a data message, and
// only when the upstream's 101 accepted permessage-deflate (RFC 7692).
enum class Compression : std::uint8_t { kNone, kPerMessageDeflate };

enum class FrameEvent : std::uint8_t {
  // Every byte given is consumed, or the rest begins a frame header (for a
  // client, a control frame) that is not whole yet.
  kNeedMore,
  // A data message (text or binary, fragmented or not) starts at the first
  // byte not consumed. Reported once per message; the next Parse() goes on
  // from there.
  kMessageStart,
  // The frame at the first byte not consumed breaks the protocol (close
  // 1002). Final: every later Parse() says the same and consumes nothing.
  kProtocolError,
  // The frame at the first byte not consumed makes its message larger than
  // the limit (close 1009). Final, likewise.
  kTooBig,
};

struct FrameStep {
  // The bytes at the front of the input that are done with: they may pass.
  // A frame header is consumed only whole, and a client's control frame
  // only with its payload, so what is not consumed (after kNeedMore) is at
  // most kMaxPending bytes that must be given again, with what follows.
  std::size_t consumed = 0;
  FrameEvent event = FrameEvent::kNeedMore;
};

class FrameParser {
 public:
  // The most bytes Parse() leaves unconsumed after kNeedMore: a client's
  // whole control frame (2 + 4 + 125); a header is at most 14.
  static constexpr std::size_t kMaxPending = 131;

  FrameParser(FrameSender sender, std::uint64_t max_message_bytes, Compression compression)
      : sender_(sender), compression_(compression), max_message_bytes_(max_message_bytes) {}

  // Follows `data`, which continues the stream right after the bytes
  // consumed so far, until it ends or an event happens.
  FrameStep Parse(std::string_view data);

  // The bytes consumed so far end a frame.
  bool at_frame_end() const { return payload_left_ == 0; }
  // What is left of the current frame's payload.
  std::uint64_t payload_left() const { return payload_left_; }

 private:
  struct Header {
    bool fin = false;
    std::uint8_t rsv = 0;  // the three bits, as in the first byte
    std::uint8_t opcode = 0;
    bool masked = false;
    std::array<std::uint8_t, 4> mask{};
    std::uint64_t length = 0;
    std::size_t size = 0;  // of the header itself
    bool minimal = true;   // the length is in its shortest form
  };
  // Reads the header at the start of `data` into `h`, a fresh Header; false
  // when it is not whole yet. Inline, defined beside Parse, its one caller.
  static inline bool ReadHeader(std::string_view data, Header& h);
  // A client frame's problem, if any, before any byte of it is consumed.
  std::optional<FrameEvent> Check(const Header& header) const;
  // A client's data frame `header` (checked) begins: its header's size.
  std::size_t Begin(const Header& header);

  FrameSender sender_;
  Compression compression_;
  std::uint64_t max_message_bytes_;
  std::uint64_t payload_left_ = 0;
  std::uint64_t message_bytes_ = 0;  // of the data message under way
  bool in_message_ = false;          // a fragmented data message awaits its continuation
  bool announced_ = false;           // kMessageStart was reported for the frame ahead,
  Header announced_header_;          // whose header this is (read and checked)
  std::optional<FrameEvent> failed_;
};

// A close frame with `code` and `reason` (at most 123 bytes): unmasked (to
// the client), or masked with `mask` (to the upstream, as a client must).
std::string CloseFrame(CloseCode code, std::string_view reason,
                       std::optional<std::array<std::uint8_t, 4>> mask = std::nullopt);

// Whether a Sec-WebSocket-Extensions value (a comma-separated list of
// extensions with parameters) names permessage-deflate.
bool NamesPerMessageDeflate(std::string_view extensions);

}  // namespace tollgate::gateway
