// The frame parser of message-rate limits (gateway/http1/websocket_frames.h),
// fed as a tunnel feeds it: in pieces cut anywhere, the bytes a Parse()
// leaves unconsumed given again with the next piece.
#include "gateway/http1/websocket_frames.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace tollgate::gateway {
namespace {

constexpr std::uint8_t kFin = 0x80;
constexpr std::uint8_t kText = 0x1;
constexpr std::uint8_t kBinary = 0x2;
constexpr std::uint8_t kContinuation = 0x0;
constexpr std::uint8_t kClose = 0x8;
constexpr std::uint8_t kPing = 0x9;
constexpr std::uint8_t kPong = 0xA;
constexpr std::uint8_t kRsv1 = 0x40;

constexpr std::array<std::uint8_t, 4> kKey = {0x37, 0xfa, 0x21, 0x3d};

// A frame: `first` is the first byte (FIN, RSV, opcode); the payload is
// masked with kKey unless `masked` is false; its length in the shortest
// form.
std::string Frame(std::uint8_t first, std::string_view payload, bool masked = true) {
  std::string out;
  out += static_cast<char>(first);
  const std::uint8_t mask_bit = masked ? 0x80 : 0;
  if (payload.size() < 126) {
    out += static_cast<char>(mask_bit | payload.size());
  } else if (payload.size() <= 0xFFFF) {
    out += static_cast<char>(mask_bit | 126);
    out += static_cast<char>(payload.size() >> 8);
    out += static_cast<char>(payload.size() & 0xFF);
  } else {
    out += static_cast<char>(mask_bit | 127);
    for (int shift = 56; shift >= 0; shift -= 8) {
      out += static_cast<char>((static_cast<std::uint64_t>(payload.size()) >> shift) & 0xFF);
    }
  }
  if (!masked) return out + std::string(payload);
  out.append(reinterpret_cast<const char*>(kKey.data()), kKey.size());
  for (std::size_t i = 0; i < payload.size(); ++i) {
    out += static_cast<char>(static_cast<std::uint8_t>(payload[i]) ^ kKey[i % 4]);
  }
  return out;
}

std::string ClosePayload(unsigned code, std::string_view reason) {
  std::string out;
  out += static_cast<char>(code >> 8);
  out += static_cast<char>(code & 0xFF);
  return out + std::string(reason);
}

// An event and where in the stream it happened (the first byte not
// consumed); kNeedMore is the end: `at` is what was consumed in all.
struct Seen {
  FrameEvent event;
  std::size_t at;
  bool operator==(const Seen&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Seen& s) {
  static constexpr const char* kNames[] = {"need_more", "message_start", "protocol_error",
                                           "too_big"};
  return out << kNames[static_cast<int>(s.event)] << "@" << s.at;
}

// Feeds `stream` in pieces of `sizes` (the last one takes the rest) and
// lists what the parser reported, ending with kNeedMore and the bytes
// consumed, unless an error ended it. Checks that no more than kMaxPending
// bytes are ever left unconsumed.
std::vector<Seen> Feed(FrameParser parser, std::string_view stream,
                       const std::vector<std::size_t>& sizes) {
  std::vector<Seen> seen;
  std::string pending;
  std::size_t base = 0;  // stream offset of pending[0]
  std::size_t given = 0;
  for (std::size_t piece = 0; given < stream.size(); ++piece) {
    const std::size_t size = piece < sizes.size() ? sizes[piece] : stream.size() - given;
    pending += stream.substr(given, size);
    given += std::min(size, stream.size() - given);
    for (;;) {
      const FrameStep step = parser.Parse(pending);
      pending.erase(0, step.consumed);
      base += step.consumed;
      if (step.event == FrameEvent::kNeedMore) {
        EXPECT_LE(pending.size(), FrameParser::kMaxPending);
        break;
      }
      seen.push_back({step.event, base});
      if (step.event != FrameEvent::kMessageStart) {
        // Final: nothing more is consumed, the same is said again.
        const FrameStep again = parser.Parse(pending);
        EXPECT_EQ(again.consumed, 0u);
        EXPECT_EQ(again.event, step.event);
        return seen;
      }
    }
  }
  seen.push_back({FrameEvent::kNeedMore, base});
  return seen;
}

FrameParser Client(std::uint64_t max = 1 << 20, Compression c = Compression::kNone) {
  return FrameParser(FrameSender::kClient, max, c);
}

// What the parser reports for `stream`, checked to be the same however
// the stream is cut: whole, byte by byte, at every single cut, and in
// random pieces.
std::vector<Seen> Parse(std::string_view stream, FrameParser parser = Client()) {
  const std::vector<Seen> whole = Feed(parser, stream, {});
  EXPECT_EQ(Feed(parser, stream, std::vector<std::size_t>(stream.size(), 1)), whole)
      << "byte by byte";
  for (std::size_t cut = 1; cut < stream.size() && cut < 300; ++cut) {
    EXPECT_EQ(Feed(parser, stream, {cut}), whole) << "cut at " << cut;
  }
  std::mt19937 random(42);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::size_t> sizes;
    for (std::size_t n = 0; n < stream.size();) {
      sizes.push_back(1 + random() % 20);
      n += sizes.back();
    }
    EXPECT_EQ(Feed(parser, stream, sizes), whole) << "random round " << round;
  }
  return whole;
}

using E = FrameEvent;

TEST(WebSocketFrames, EachDataMessageStartsOnceWhateverTheCuts) {
  const std::string a = Frame(kFin | kText, "hello");
  const std::string b = Frame(kFin | kBinary, std::string(300, 'b'));   // 16-bit length
  const std::string c = Frame(kFin | kText, std::string(70'000, 'c'));  // 64-bit length
  const std::string d = Frame(kFin | kText, "");
  const std::string stream = a + b + c + d;
  const std::size_t end = stream.size();
  EXPECT_EQ(Parse(stream), (std::vector<Seen>{{E::kMessageStart, 0},
                                              {E::kMessageStart, a.size()},
                                              {E::kMessageStart, a.size() + b.size()},
                                              {E::kMessageStart, a.size() + b.size() + c.size()},
                                              {E::kNeedMore, end}}));
}

TEST(WebSocketFrames, AFragmentedMessageCountsOnceAndControlFramesNever) {
  const std::string first = Frame(kText, "frag");
  const std::string ping = Frame(kFin | kPing, "p");
  const std::string middle = Frame(kContinuation, std::string(200, 'm'));
  const std::string pong = Frame(kFin | kPong, "");
  const std::string last = Frame(kFin | kContinuation, "end");
  const std::string next = Frame(kFin | kBinary, "next");
  const std::string close = Frame(kFin | kClose, ClosePayload(1000, "bye"));
  const std::string stream = ping + first + ping + middle + pong + last + next + close;
  EXPECT_EQ(Parse(stream),
            (std::vector<Seen>{{E::kMessageStart, ping.size()},
                               {E::kMessageStart, stream.size() - next.size() - close.size()},
                               {E::kNeedMore, stream.size()}}));
}

TEST(WebSocketFrames, TheHeaderAndAControlFrameAreConsumedOnlyWhole) {
  FrameParser parser = Client();
  const std::string text = Frame(kFin | kText, std::string(1000, 'x'));
  // Three bytes of a four-byte header: nothing consumed.
  EXPECT_EQ(parser.Parse(text.substr(0, 3)).consumed, 0u);
  FrameStep step = parser.Parse(text.substr(0, 8));
  EXPECT_EQ(step.event, E::kMessageStart);
  EXPECT_EQ(step.consumed, 0u);
  // Then the header and what came of the payload pass.
  step = parser.Parse(text.substr(0, 20));
  EXPECT_EQ(step.event, E::kNeedMore);
  EXPECT_EQ(step.consumed, 20u);
  EXPECT_FALSE(parser.at_frame_end());
  EXPECT_EQ(parser.payload_left(), 1000u - 12u);
  step = parser.Parse(std::string_view(text).substr(20));
  EXPECT_EQ(step.consumed, text.size() - 20);
  EXPECT_TRUE(parser.at_frame_end());
  // A ping passes with its payload or not at all.
  const std::string ping = Frame(kFin | kPing, std::string(125, 'p'));
  EXPECT_EQ(parser.Parse(ping.substr(0, ping.size() - 1)).consumed, 0u);
  EXPECT_EQ(parser.Parse(ping).consumed, ping.size());
  EXPECT_EQ(ping.size(), FrameParser::kMaxPending);
}

TEST(WebSocketFrames, ClientFramesMustBeMasked) {
  const std::string ok = Frame(kFin | kText, "fine");
  EXPECT_EQ(Parse(ok + Frame(kFin | kText, "plain", false)),
            (std::vector<Seen>{{E::kMessageStart, 0}, {E::kProtocolError, ok.size()}}));
  EXPECT_EQ(Parse(Frame(kFin | kPing, "", false)), (std::vector<Seen>{{E::kProtocolError, 0}}));
}

TEST(WebSocketFrames, ReservedOpcodesAndBitsAreProtocolErrors) {
  for (std::uint8_t opcode : {3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF}) {
    EXPECT_EQ(Parse(Frame(kFin | opcode, "x")), (std::vector<Seen>{{E::kProtocolError, 0}}))
        << int{opcode};
  }
  for (std::uint8_t rsv : {0x40, 0x20, 0x10, 0x60}) {
    EXPECT_EQ(Parse(Frame(kFin | rsv | kText, "x")), (std::vector<Seen>{{E::kProtocolError, 0}}))
        << int{rsv};
  }
}

TEST(WebSocketFrames, Rsv1OnlyOnTheFirstFrameOfACompressedMessage) {
  const FrameParser deflate = Client(1 << 20, Compression::kPerMessageDeflate);
  const std::string first = Frame(kRsv1 | kText, "abc");
  const std::string last = Frame(kFin | kContinuation, "def");
  const std::string binary = Frame(kFin | kRsv1 | kBinary, "z");
  EXPECT_EQ(Parse(first + last + binary, deflate),
            (std::vector<Seen>{{E::kMessageStart, 0},
                               {E::kMessageStart, first.size() + last.size()},
                               {E::kNeedMore, first.size() + last.size() + binary.size()}}));
  // Not on a continuation, not on a control frame, not without the extension.
  EXPECT_EQ(Parse(first + Frame(kFin | kRsv1 | kContinuation, "def"), deflate),
            (std::vector<Seen>{{E::kMessageStart, 0}, {E::kProtocolError, first.size()}}));
  EXPECT_EQ(Parse(Frame(kFin | kRsv1 | kPing, ""), deflate),
            (std::vector<Seen>{{E::kProtocolError, 0}}));
  EXPECT_EQ(Parse(first), (std::vector<Seen>{{E::kProtocolError, 0}}));
  // RSV2 and RSV3 mean nothing with permessage-deflate either.
  EXPECT_EQ(Parse(Frame(kFin | 0x20 | kText, "x"), deflate),
            (std::vector<Seen>{{E::kProtocolError, 0}}));
}

TEST(WebSocketFrames, ControlFramesAreShortAndFinal) {
  for (std::uint8_t opcode : {kPing, kPong, kClose}) {
    const std::string payload =
        opcode == kClose ? ClosePayload(1000, std::string(123, 'r')) : std::string(125, 'p');
    const std::string longest = Frame(kFin | opcode, payload);
    EXPECT_EQ(Parse(longest), (std::vector<Seen>{{E::kNeedMore, longest.size()}})) << int{opcode};
    EXPECT_EQ(Parse(Frame(kFin | opcode, payload + "x")),
              (std::vector<Seen>{{E::kProtocolError, 0}}))
        << int{opcode};
    EXPECT_EQ(Parse(Frame(opcode, opcode == kClose ? "" : "p")),
              (std::vector<Seen>{{E::kProtocolError, 0}}))
        << int{opcode};
  }
}

TEST(WebSocketFrames, AClosePayloadIsEmptyOrAValidCodeAndUtf8Reason) {
  const auto verdict = [](const std::string& payload) {
    const std::vector<Seen> seen = Parse(Frame(kFin | kClose, payload));
    return seen.front().event;
  };
  EXPECT_EQ(verdict(""), E::kNeedMore);
  EXPECT_EQ(verdict(ClosePayload(1000, "")), E::kNeedMore);
  EXPECT_EQ(verdict(ClosePayload(1001, "going away")), E::kNeedMore);
  EXPECT_EQ(verdict(ClosePayload(1011, "")), E::kNeedMore);
  EXPECT_EQ(verdict(ClosePayload(1013, "")), E::kNeedMore);
  EXPECT_EQ(verdict(ClosePayload(3000, "")), E::kNeedMore);
  EXPECT_EQ(verdict(ClosePayload(4999, "d\xc3\xa9j\xc3\xa0 vu \xe2\x82\xac \xf0\x9f\x98\x80")),
            E::kNeedMore);
  EXPECT_EQ(verdict(std::string(1, '\x03')), E::kProtocolError);  // half a code
  for (unsigned code : {0u, 999u, 1004u, 1005u, 1006u, 1015u, 1016u, 2999u, 5000u, 65535u}) {
    EXPECT_EQ(verdict(ClosePayload(code, "")), E::kProtocolError) << code;
  }
  for (const char* reason : {"\xff", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    EXPECT_EQ(verdict(ClosePayload(1000, reason)), E::kProtocolError) << reason;
  }
}

TEST(WebSocketFrames, FragmentsMustFollowTheirMessage) {
  // A continuation with no message under way.
  EXPECT_EQ(Parse(Frame(kFin | kContinuation, "x")), (std::vector<Seen>{{E::kProtocolError, 0}}));
  const std::string whole = Frame(kFin | kText, "done");
  EXPECT_EQ(Parse(whole + Frame(kContinuation, "x")),
            (std::vector<Seen>{{E::kMessageStart, 0}, {E::kProtocolError, whole.size()}}));
  // A new data frame inside a fragmented message.
  const std::string first = Frame(kBinary, "a");
  EXPECT_EQ(Parse(first + Frame(kFin | kText, "b")),
            (std::vector<Seen>{{E::kMessageStart, 0}, {E::kProtocolError, first.size()}}));
}

TEST(WebSocketFrames, LengthsInTheirShortestFormAndBelow2To63) {
  std::string sixteen = Frame(kFin | kText, std::string(125, 'x'));
  // 125 in the 16-bit form.
  sixteen.replace(1, 1, std::string{static_cast<char>(0x80 | 126), 0, 125});
  EXPECT_EQ(Parse(sixteen), (std::vector<Seen>{{E::kProtocolError, 0}}));
  std::string sixty_four = Frame(kFin | kText, std::string(300, 'x'));
  sixty_four.replace(1, 3, std::string{static_cast<char>(0x80 | 127), 0, 0, 0, 0, 0, 0, 1, 44});
  EXPECT_EQ(Parse(sixty_four), (std::vector<Seen>{{E::kProtocolError, 0}}));
  const std::string huge = std::string{static_cast<char>(kFin | kBinary),
                                       static_cast<char>(0x80 | 127),
                                       static_cast<char>(0x80),
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       1,
                                       2,
                                       3,
                                       4};
  EXPECT_EQ(Parse(huge, Client(~std::uint64_t{0})), (std::vector<Seen>{{E::kProtocolError, 0}}));
}

TEST(WebSocketFrames, AMessageAboveTheLimitIsTooBigFragmentsCounted) {
  const FrameParser ten = Client(10);
  const std::string exactly = Frame(kFin | kText, "0123456789");
  const std::string over = Frame(kFin | kBinary, "0123456789A");
  EXPECT_EQ(Parse(exactly + over, ten),
            (std::vector<Seen>{{E::kMessageStart, 0}, {E::kTooBig, exactly.size()}}));
  // 6 + 4 fits; 6 + 5 does not, found at the fragment that goes beyond,
  // before any of it passes; control frames in between do not count.
  const std::string six = Frame(kText, "012345");
  const std::string ping = Frame(kFin | kPing, "ping-payload");
  const std::string four = Frame(kFin | kContinuation, "6789");
  EXPECT_EQ(Parse(six + ping + four + six + ping + Frame(kFin | kContinuation, "6789A"), ten),
            (std::vector<Seen>{{E::kMessageStart, 0},
                               {E::kMessageStart, six.size() + ping.size() + four.size()},
                               {E::kTooBig, 2 * (six.size() + ping.size()) + four.size()}}));
  // A frame header announcing more than the limit is enough.
  const std::string announced = Frame(kFin | kBinary, std::string(70'000, 'z')).substr(0, 14);
  EXPECT_EQ(Feed(ten, announced, {}), (std::vector<Seen>{{E::kTooBig, 0}}));
}

TEST(WebSocketFrames, ServerFramesAreOnlyFollowed) {
  // Unmasked, with any bits: nothing is reported; where frames end is known.
  const std::string a = Frame(kFin | kText, std::string(1000, 'a'), false);
  const std::string b = Frame(kFin | 0x70 | 0x3, "odd", false);
  const std::string c = Frame(kFin | kClose, "", false);
  const std::string stream = a + b + c;
  const FrameParser server(FrameSender::kServer, 10, Compression::kNone);
  EXPECT_EQ(Parse(stream, server), (std::vector<Seen>{{E::kNeedMore, stream.size()}}));
  FrameParser follow = server;
  EXPECT_TRUE(follow.at_frame_end());
  EXPECT_EQ(follow.Parse(std::string_view(stream).substr(0, 500)).consumed, 500u);
  EXPECT_FALSE(follow.at_frame_end());
  EXPECT_EQ(follow.payload_left(), a.size() - 500);
  EXPECT_EQ(follow.Parse(std::string_view(stream).substr(500, a.size() - 500)).consumed,
            a.size() - 500);
  EXPECT_TRUE(follow.at_frame_end());
}

TEST(WebSocketFrames, CloseFramesOfTollgate) {
  EXPECT_EQ(CloseFrame(CloseCode::kPolicyViolation, "rate_limited"),
            std::string("\x88\x0e\x03\xf0rate_limited", 16));
  EXPECT_EQ(CloseFrame(CloseCode::kMessageTooBig, ""), std::string("\x88\x02\x03\xf1", 4));
  // The masked one is a valid client frame carrying the same payload.
  const std::string masked = CloseFrame(CloseCode::kProtocolError, "protocol_error", kKey);
  EXPECT_EQ(masked, Frame(kFin | kClose, ClosePayload(1002, "protocol_error")));
  EXPECT_EQ(Parse(masked), (std::vector<Seen>{{E::kNeedMore, masked.size()}}));
  // A reason too long for a control frame is cut to fit.
  EXPECT_EQ(CloseFrame(CloseCode::kTryAgainLater, std::string(200, 'r')).size(), 127u);
}

TEST(WebSocketFrames, PerMessageDeflateIsFoundInTheExtensionsList) {
  EXPECT_TRUE(NamesPerMessageDeflate("permessage-deflate"));
  EXPECT_TRUE(NamesPerMessageDeflate("permessage-deflate; client_max_window_bits=15"));
  EXPECT_TRUE(NamesPerMessageDeflate("x-foo, PerMessage-Deflate ;server_no_context_takeover"));
  EXPECT_FALSE(NamesPerMessageDeflate(""));
  EXPECT_FALSE(NamesPerMessageDeflate("permessage-deflate-v2"));
  EXPECT_FALSE(NamesPerMessageDeflate("x-foo; p=\"a, permessage-deflate\""));
}

}  // namespace
}  // namespace tollgate::gateway
