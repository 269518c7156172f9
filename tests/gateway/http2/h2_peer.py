"""HTTP/2 clients for tests/gateway/http2/connection_test.cc, on Debian's
python3-h2 (run with /usr/bin/python3): `h2_peer.py SCENARIO PORT`.

Well-behaved scenarios use h2's state machine (with its outbound checks off
where a malformed request is the point); floods write raw frames
(hyperframe, hpack) as an attacker would. Each scenario prints what it saw
as `key=value` lines and exits 0, or prints the problem and exits 1. Socket
reads have a timeout so that a hung server fails the test instead of
hanging it; nothing here measures time.
"""

import os
import select
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import hpack
from h2.settings import SettingCodes
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, HeadersFrame,
                              PingFrame, RstStreamFrame, SettingsFrame)

TIMEOUT = 20
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM = (
    0, 1, 2, 7, 8, 11)


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Stream:
    def __init__(self):
        self.headers = None
        self.interim = []
        self.data = bytearray()
        self.trailers = None
        self.ended = False
        self.reset = None

    def status(self):
        return dict(self.headers or {}).get(b":status")

    def done(self):
        return self.ended or self.reset is not None


class Client:
    """An h2 client over a blocking socket. Body data is acknowledged as it
    arrives, except on streams in `no_ack` (only the connection's window is
    given back for those)."""

    def __init__(self, port, validate=True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        config = h2.config.H2Configuration(
            client_side=True, header_encoding=None,
            validate_outbound_headers=validate, normalize_outbound_headers=validate)
        self.conn = h2.connection.H2Connection(config)
        self.conn.initiate_connection()
        self.streams = {}
        self.goaways = []
        self.closed = False
        self.no_ack = set()
        self.unacked = {}
        self.outbox = {}  # stream id -> [remaining body, end_stream, trailers]
        self.ping_acks = 0
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, method, path, headers=(), body=None, trailers=None, end=True,
                pseudo=None):
        sid = self.conn.get_next_available_stream_id()
        if pseudo is None:
            pseudo = [(":method", method), (":scheme", "http"), (":authority", "127.0.0.1"),
                      (":path", path)]
        no_body = body is None and trailers is None and end
        self.conn.send_headers(sid, pseudo + list(headers), end_stream=no_body)
        self.streams[sid] = Stream()
        if not no_body:
            self.outbox[sid] = [bytes(body or b""), end, trailers]
        self.pump()
        return sid

    def pump(self):
        """Sends what flow control allows of each stream's pending body."""
        for sid in list(self.outbox):
            body, end, trailers = self.outbox[sid]
            if self.streams[sid].reset is not None:
                del self.outbox[sid]
                continue
            while body:
                window = min(self.conn.local_flow_control_window(sid),
                             self.conn.max_outbound_frame_size)
                if window <= 0:
                    break
                self.conn.send_data(sid, body[:window])
                body = body[window:]
            self.outbox[sid][0] = body
            if not body and end:
                if trailers:
                    self.conn.send_headers(sid, trailers, end_stream=True)
                else:
                    self.conn.end_stream(sid)
                del self.outbox[sid]
        self.flush()

    def read_once(self):
        data = self.sock.recv(1 << 16)
        if not data:
            self.closed = True
            return
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            raise Failure("protocol error from h2: %r" % e)
        for event in events:
            self.on_event(event)
        self.flush()

    def on_event(self, e):
        stream = self.streams.get(getattr(e, "stream_id", None))
        if isinstance(e, h2.events.ResponseReceived):
            stream.headers = e.headers
        elif isinstance(e, h2.events.InformationalResponseReceived):
            stream.interim.append(e.headers)
        elif isinstance(e, h2.events.DataReceived):
            stream.data += e.data
            if e.stream_id in self.no_ack:
                self.unacked[e.stream_id] = (self.unacked.get(e.stream_id, 0) +
                                             e.flow_controlled_length)
                if e.flow_controlled_length:
                    self.conn.increment_flow_control_window(e.flow_controlled_length)
            elif e.flow_controlled_length:
                try:
                    self.conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                except h2.exceptions.StreamClosedError:
                    pass
        elif isinstance(e, h2.events.TrailersReceived):
            stream.trailers = e.headers
        elif isinstance(e, h2.events.StreamEnded):
            stream.ended = True
        elif isinstance(e, h2.events.StreamReset):
            if stream is not None:
                stream.reset = e.error_code
        elif isinstance(e, h2.events.ConnectionTerminated):
            self.goaways.append((e.error_code, e.last_stream_id))
        elif isinstance(e, h2.events.PingAckReceived):
            self.ping_acks += 1

    def wait(self, condition, what):
        while not condition():
            if self.closed:
                raise Failure("connection closed while waiting for " + what)
            self.pump()
            self.read_once()

    def wait_done(self, *sids):
        self.wait(lambda: all(self.streams[s].done() for s in sids), "streams %s" % (sids,))

    def ack(self, sid):
        n = self.unacked.pop(sid, 0)
        self.no_ack.discard(sid)
        if n:
            self.conn.increment_flow_control_window(n, stream_id=sid)
            self.flush()

    def lift_stream_limit(self):
        """h2 keeps to the server's SETTINGS_MAX_CONCURRENT_STREAMS itself:
        lifted, as a careless client's."""
        self.conn.remote_settings[SettingCodes.MAX_CONCURRENT_STREAMS] = 1 << 20
        self.conn.remote_settings.acknowledge()

    def round_trip(self):
        """A PING and its ACK: everything sent before it has been read and
        handled by the server."""
        before = self.ping_acks
        self.conn.ping(os.urandom(8))
        self.flush()
        self.wait(lambda: self.ping_acks > before, "PING ACK")


def body_of(n):
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


def headers_dict(headers):
    return {k.decode(): v.decode() for k, v in headers or []}


# --- well-behaved peers ---------------------------------------------------

def scenario_echo(port):
    c = Client(port)
    body = os.urandom(1 << 20)
    a = c.request("POST", "/echo", body=body, trailers=[("x-trailer", "t1")])
    b = c.request("POST", "/echo", [("content-length", "5")], body=b"hello")
    c.wait_done(a, b)
    sa, sb = c.streams[a], c.streams[b]
    check(sa.status() == b"200" and bytes(sa.data) == body, "1 MiB echo differs")
    check(headers_dict(sa.trailers).get("x-trailer") == "t1", "trailers not echoed: %r" %
          sa.trailers)
    check(sb.status() == b"200" and bytes(sb.data) == b"hello", "small echo differs")
    print("echoed=%d" % len(sa.data))


def scenario_stream_echo(port):
    """The response streams while the request is still being sent."""
    c = Client(port)
    body = os.urandom(256 * 1024)
    sid = c.request("POST", "/echo-stream", body=body)
    c.wait_done(sid)
    s = c.streams[sid]
    check(s.status() == b"200" and bytes(s.data) == body, "streamed echo differs")
    print("echoed=%d" % len(s.data))


def scenario_trailers(port):
    c = Client(port)
    a = c.request("GET", "/trailers")
    b = c.request("POST", "/trailers-only", [("content-type", "application/grpc")], body=b"")
    c.wait_done(a, b)
    sa, sb = c.streams[a], c.streams[b]
    check(sa.status() == b"200" and bytes(sa.data) == b"hello", "body before trailers")
    t = headers_dict(sa.trailers)
    check(t.get("grpc-status") == "0" and t.get("x-check") == "yes", "trailers: %r" % t)
    h = headers_dict(sb.headers)
    check(sb.ended and not sb.data and sb.trailers is None, "trailers-only has no body")
    check(h.get("grpc-status") == "8" and h.get("grpc-message") == "limited",
          "trailers-only header: %r" % h)
    print("trailers=%s" % t["grpc-status"])
    print("trailers_only=%s" % h["grpc-status"])


def scenario_no_body(port):
    c = Client(port)
    head = c.request("HEAD", "/hello")
    s204 = c.request("GET", "/204")
    s304 = c.request("GET", "/304")
    interim = c.request("GET", "/interim")
    c.wait_done(head, s204, s304, interim)
    for sid, status in ((head, b"200"), (s204, b"204"), (s304, b"304")):
        s = c.streams[sid]
        check(s.status() == status and s.ended and not s.data,
              "stream %d: %r with %d bytes" % (sid, s.status(), len(s.data)))
    check(headers_dict(c.streams[head].headers).get("content-length") == "5",
          "HEAD keeps content-length")
    check("content-length" not in headers_dict(c.streams[s204].headers), "204 has no length")
    si = c.streams[interim]
    check(len(si.interim) == 1 and headers_dict(si.interim[0]).get(":status") == "103",
          "interim 103: %r" % si.interim)
    check(si.status() == b"200" and bytes(si.data) == b"final", "final after interim")
    print("no_body=ok")


def scenario_resets(port):
    c = Client(port)
    a = c.request("GET", "/reset")
    b = c.request("GET", "/no-response")
    d = c.request("GET", "/hello")
    c.wait_done(a, b, d)
    check(c.streams[a].reset == CANCEL, "handler's reset: %r" % c.streams[a].reset)
    check(c.streams[b].reset == INTERNAL_ERROR, "unanswered: %r" % c.streams[b].reset)
    check(c.streams[d].status() == b"200", "the connection goes on")
    print("reset=%d unanswered=%d" % (c.streams[a].reset, c.streams[b].reset))


def scenario_info(port):
    c = Client(port)
    sid = c.request("GET", "/info?x=1", [("cookie", "a=1"), ("cookie", "b=2"),
                                         ("x-custom", "v")])
    c.wait_done(sid)
    s = c.streams[sid]
    check(s.status() == b"200", "status %r" % s.status())
    sys.stdout.write(s.data.decode())


MALFORMED = {
    "no_path": [(":method", "GET"), (":scheme", "http"), (":authority", "a")],
    "no_authority": [(":method", "GET"), (":scheme", "http"), (":path", "/")],
    "upper_case": [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/"),
                   ("X-Upper", "1")],
    "connection": [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/"),
                   ("connection", "keep-alive")],
    "te_gzip": [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/"),
                ("te", "gzip")],
    "host_differs": [(":method", "GET"), (":scheme", "http"), (":authority", "a"),
                     (":path", "/"), ("host", "b")],
    "bad_value": [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/"),
                  ("x-bad", "a\x01b")],
    "pseudo_late": [(":method", "GET"), (":scheme", "http"), ("x-a", "1"), (":authority", "a"),
                    (":path", "/")],
    "two_paths": [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/"),
                  (":path", "/b")],
    "length_mismatch": [(":method", "POST"), (":scheme", "http"), (":authority", "a"),
                        (":path", "/echo"), ("content-length", "10")],
}


def scenario_malformed(port):
    c = Client(port, validate=False)
    sids = {}
    for name, headers in MALFORMED.items():
        body = b"abc" if name == "length_mismatch" else None
        sids[name] = c.request("GET", "/", pseudo=headers, body=body)
    c.wait_done(*sids.values())
    for name, sid in sids.items():
        s = c.streams[sid]
        check(s.reset == PROTOCOL_ERROR and s.headers is None,
              "%s: reset %r, status %r" % (name, s.reset, s.status()))
    good = c.request("GET", "/hello")
    c.wait_done(good)
    check(c.streams[good].status() == b"200", "the connection goes on")
    print("malformed=%d" % len(sids))


def scenario_large_header(port):
    c = Client(port)
    big = c.request("GET", "/hello", [("x-big", "v" * 20000)])
    big_post = c.request("POST", "/echo", [("x-big", "v" * 20000)], body=b"x" * 1000)
    c.wait_done(big, big_post)
    for sid in (big, big_post):
        check(c.streams[sid].status() == b"431", "oversized header: %r" % c.streams[sid].status())
    # Trailers over the limit reset the stream.
    t = c.request("POST", "/echo", body=b"abc", trailers=[("x-big", "v" * 20000)])
    c.wait_done(t)
    check(c.streams[t].reset == ENHANCE_YOUR_CALM, "oversized trailers: %r" % c.streams[t].reset)
    good = c.request("GET", "/hello", [("x-fine", "v" * 8000)])
    c.wait_done(good)
    check(c.streams[good].status() == b"200", "a header within the limit")
    print("too_large=431")


def scenario_slow_handler(port):
    """Stream A's handler reads nothing until the gate opens: its window
    stays shut, while stream B's 1 MiB goes through on the same connection."""
    c = Client(port)
    a_body = body_of(300 * 1024)
    a = c.request("POST", "/gate", body=a_body)
    b_body = os.urandom(1 << 20)
    b = c.request("POST", "/echo", body=b_body)
    c.wait_done(b)
    check(bytes(c.streams[b].data) == b_body, "B's echo")
    check(not c.streams[a].done() and c.outbox.get(a) and len(c.outbox[a][0]) > 0,
          "A's body is held back by its window")
    held = len(c.outbox[a][0])
    opener = c.request("GET", "/open-gate")
    c.wait_done(a, opener)
    s = c.streams[a]
    check(s.status() == b"200" and bytes(s.data) == b"gate:%d" % len(a_body),
          "A after the gate: %r %r" % (s.status(), bytes(s.data[:40])))
    print("held=%d" % held)


def scenario_slow_reader(port):
    """The client does not give stream A's window back: A stops at the
    initial window while stream B's 1 MiB arrives; then A completes."""
    c = Client(port)
    n = 1 << 20
    a = c.request("GET", "/big?n=%d" % n)
    c.no_ack.add(a)
    b = c.request("GET", "/big?n=%d" % n)
    c.wait_done(b)
    check(len(c.streams[b].data) == n, "B complete")
    got = len(c.streams[a].data)
    check(got <= 65535 and not c.streams[a].done(), "A beyond its window: %d" % got)
    c.ack(a)
    c.wait_done(a)
    check(bytes(c.streams[a].data) == body_of(n), "A complete")
    print("a_before_ack=%d" % got)


def scenario_zero_window(port):
    """A stream whose window never opens is reset when the handler's write
    times out."""
    c = Client(port)
    a = c.request("GET", "/big-timeout?n=%d" % (1 << 20))
    c.no_ack.add(a)
    c.wait_done(a)
    check(c.streams[a].reset == CANCEL, "reset after the stall: %r" % c.streams[a].reset)
    good = c.request("GET", "/hello")
    c.wait_done(good)
    check(c.streams[good].status() == b"200", "the connection goes on")
    print("stalled_reset=%d" % c.streams[a].reset)


def scenario_client_reset(port):
    c = Client(port)
    sid = c.request("POST", "/gate", body=b"abc", end=False)
    c.round_trip()
    c.conn.reset_stream(sid, CANCEL)
    c.flush()
    c.round_trip()
    good = c.request("GET", "/hello")
    c.wait_done(good)
    print("reset_sent=1")


def gated_streams(c, port, n, refusals):
    """Opens `n` streams to /gate on `c`, waits for `refusals` of them to be
    refused, opens the gate from another connection and waits for all:
    how many were served and how many refused."""
    sids = [c.request("GET", "/gate") for _ in range(n)]
    c.wait(lambda: sum(c.streams[s].reset == REFUSED_STREAM for s in sids) >= refusals,
           "%d refusals" % refusals)
    other = Client(port)
    opener = other.request("GET", "/open-gate")
    other.wait_done(opener)
    c.wait_done(*sids)
    ok = sum(c.streams[s].status() == b"200" for s in sids)
    return ok, sum(c.streams[s].reset == REFUSED_STREAM for s in sids)


def scenario_too_many_streams(port):
    """200 streams before the server's SETTINGS arrive: 128 are served
    (once the gate opens, from another connection), 72 refused."""
    ok, refused = gated_streams(Client(port), port, 200, 72)
    check(ok == 128 and refused == 72, "ok=%d refused=%d" % (ok, refused))
    print("ok=%d refused=%d" % (ok, refused))


def scenario_beyond_acknowledged_limit(port):
    """130 streams after the server's SETTINGS (128 streams) are
    acknowledged: the 2 beyond the limit are refused, the 128 are served
    once the gate opens (from another connection), and no GOAWAY comes."""
    c = Client(port)
    c.round_trip()  # the server has our ACK of its SETTINGS
    c.lift_stream_limit()
    ok, refused = gated_streams(c, port, 130, 2)
    check(not c.goaways, "GOAWAY: %r" % c.goaways)
    print("ok=%d refused=%d" % (ok, refused))


def scenario_reused_stream_id(port):
    """Stream 5 is served, then a HEADERS frame opens stream 3 (below it,
    never used): GOAWAY PROTOCOL_ERROR naming stream 5."""
    raw = Raw(port)
    raw.sock.sendall(raw.headers(5, "/hello").serialize())
    raw.read_until(lambda: 5 in raw.ended, "stream 5's answer")
    raw.sock.sendall(raw.headers(3, "/hello").serialize())
    raw.read_until(lambda: raw.goaway is not None, "the GOAWAY")
    print("status5=%s goaway=%d last_stream=%d" % (raw.statuses.get(5), raw.goaway[0],
                                                   raw.goaway[1]))


def scenario_reset_keeps_count(port):
    """Streams reset by the client still count while their handlers run: the
    128 that wait at the gate leave no room for more until they end."""
    c = Client(port)
    c.round_trip()  # the server's SETTINGS are in
    held = [c.request("GET", "/stubborn-gate") for _ in range(128)]
    c.round_trip()
    for sid in held:
        c.conn.reset_stream(sid, CANCEL)
    c.flush()
    c.round_trip()
    extra = [c.request("GET", "/hello") for _ in range(10)]
    c.wait_done(*extra)
    refused = sum(c.streams[s].reset == REFUSED_STREAM for s in extra)
    check(refused == 10, "refused while handlers run: %d" % refused)
    other = Client(port)
    opener = other.request("GET", "/open-gate")
    other.wait_done(opener)
    # Once the handlers have ended there is room again.
    while True:
        again = c.request("GET", "/hello")
        c.wait_done(again)
        if c.streams[again].status() == b"200":
            break
        check(c.streams[again].reset == REFUSED_STREAM, "refused or served")
        c.round_trip()
    print("refused=%d" % refused)


def scenario_drain(port):
    """Shutdown() during a request: a GOAWAY notice, then after the PING the
    final GOAWAY naming the last stream; streams in flight finish; then the
    server closes the connection. (Raw frames: h2 treats the first GOAWAY as
    the end of the connection.)"""
    raw = Raw(port)
    held, drain = 1, 3
    raw.sock.sendall(raw.headers(held, "/gate").serialize() +
                     raw.headers(drain, "/drain").serialize())
    raw.read_until(lambda: len(raw.goaways) >= 2 and drain in raw.ended, "two GOAWAYs")
    check(raw.statuses.get(drain) == "200", "the draining request is answered")
    check(raw.goaways[0] == (NO_ERROR, 2**31 - 1), "notice: %r" % (raw.goaways[0],))
    check(raw.goaways[1] == (NO_ERROR, drain), "final: %r" % (raw.goaways[1],))
    check(held not in raw.ended, "the held stream is still in flight")
    other = Client(port)
    opener = other.request("GET", "/open-gate")
    other.wait_done(opener)
    raw.read_until(lambda: held in raw.ended, "the held stream")
    check(raw.statuses.get(held) == "200", "held stream finished")
    raw.read_until(lambda: raw.closed, "the server's close")
    print("goaways=%d" % len(raw.goaways))


def scenario_idle(port):
    c = Client(port)
    while not c.closed:
        c.read_once()
    check(c.goaways and c.goaways[-1][0] == NO_ERROR, "idle GOAWAY: %r" % c.goaways)
    print("idle_goaway=%d" % c.goaways[-1][0])


# --- attackers: raw frames ------------------------------------------------

class Raw:
    """Frames written and read by hand: the first GOAWAY, or every GOAWAY,
    response status and END_STREAM with read_until(). PINGs are answered."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.buf = b""
        self.goaway = None
        self.goaways = []
        self.statuses = {}
        self.ended = set()
        self.closed = False
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.sock.sendall(PREFACE + SettingsFrame(0).serialize())

    def on_frame(self, frame):
        if frame.type == 0x7:
            if self.goaway is None:
                self.goaway = (frame.error_code, frame.last_stream_id)
            self.goaways.append((frame.error_code, frame.last_stream_id))
        elif frame.type == 0x1:
            for name, value in self.decoder.decode(frame.data):
                if name == ":status":
                    self.statuses[frame.stream_id] = value
        elif frame.type == 0x6 and "ACK" not in frame.flags:
            self.sock.sendall(PingFrame(0, opaque_data=frame.opaque_data,
                                        flags=["ACK"]).serialize())
        if frame.type in (0x0, 0x1) and "END_STREAM" in frame.flags:
            self.ended.add(frame.stream_id)

    def read_until(self, condition, what):
        while not condition():
            check(not self.closed, "closed while waiting for " + what)
            self.read_some()

    def read_some(self):
        try:
            data = self.sock.recv(1 << 16)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            self.closed = True
            return
        self.buf += data
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + length:
                break
            frame, _ = Frame.parse_frame_header(memoryview(self.buf[:9]))
            frame.parse_body(memoryview(self.buf[9:9 + length]))
            self.buf = self.buf[9 + length:]
            self.on_frame(frame)

    def scan(self, block):
        """Reads what has arrived (until a GOAWAY or the end when `block`)."""
        while not self.closed:
            if not block:
                ready, _, _ = select.select([self.sock], [], [], 0)
                if not ready:
                    return
            try:
                self.read_some()
            except BrokenPipeError:  # answering a PING after the server closed
                self.closed = True
            if block and self.goaway is not None:
                return

    def flood(self, frames, batch=100, pause_after=100):
        """Sends `frames` in batches until a GOAWAY arrives; the number sent.
        With $WITNESS set (a file name), pauses once, mid-flood, after
        `pause_after` frames: prints `flooding` and goes on once that file
        exists, so that the test can start another client in between."""
        witness = os.environ.get("WITNESS")
        sent = 0
        while sent < len(frames):
            end = pause_after if witness and sent < pause_after else sent + batch
            chunk = frames[sent:end]
            try:
                self.sock.sendall(b"".join(f.serialize() for f in chunk))
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
            self.scan(False)
            if self.goaway is not None or self.closed:
                break
            if witness and sent == pause_after:
                print("flooding", flush=True)
                self.wait_for_file(witness)
        if self.goaway is None:
            self.scan(True)
        return sent

    def wait_for_file(self, path):
        """Reads (answering PINGs) until `path` exists."""
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(path):
            check(time.monotonic() < deadline, "no " + path)
            self.scan(False)
            time.sleep(0.01)

    def headers(self, sid, path, end_stream=True):
        block = self.encoder.encode([(":method", "GET"), (":scheme", "http"),
                                     (":authority", "127.0.0.1"), (":path", path)])
        flags = ["END_HEADERS"] + (["END_STREAM"] if end_stream else [])
        return HeadersFrame(sid, data=block, flags=flags)


def report_goaway(raw, sent):
    check(raw.goaway is not None, "no GOAWAY after %d frames" % sent)
    print("goaway=%d last_stream=%d sent=%d" % (raw.goaway[0], raw.goaway[1], sent))


def scenario_rapid_reset(port):
    raw = Raw(port)
    frames = []
    for i in range(5000):
        sid = 1 + 2 * i
        frames.append(raw.headers(sid, "/gate"))
        frames.append(RstStreamFrame(sid, error_code=CANCEL))
    sent = raw.flood(frames)
    report_goaway(raw, sent)


def scenario_continuation_flood(port):
    raw = Raw(port)
    block = raw.encoder.encode([(":method", "GET"), (":scheme", "http"),
                                (":authority", "127.0.0.1"), (":path", "/hello")])
    frames = [HeadersFrame(1, data=block[:3], flags=["END_STREAM"])]
    frames += [ContinuationFrame(1, data=b"") for _ in range(10000)]
    # The limit is a few CONTINUATIONs: a witness starts in the middle of
    # the header block.
    sent = raw.flood(frames, pause_after=4)
    report_goaway(raw, sent)


def scenario_ping_flood(port):
    raw = Raw(port)
    sent = raw.flood([PingFrame(0, opaque_data=b"12345678") for _ in range(20000)])
    report_goaway(raw, sent)


def scenario_settings_flood(port):
    raw = Raw(port)
    sent = raw.flood([SettingsFrame(0, settings={0x4: 65535}) for _ in range(20000)])
    report_goaway(raw, sent)


def scenario_empty_data_flood(port):
    raw = Raw(port)
    frames = [raw.headers(1, "/gate", end_stream=False)]
    frames += [DataFrame(1, data=b"") for _ in range(20000)]
    sent = raw.flood(frames)
    report_goaway(raw, sent)


# An HPACK bomb: the first header block stores one 4,000-byte value in the
# HPACK dynamic table (index 62); every later HEADERS frame (16 KiB, the
# largest frame) is the four pseudo-header fields and then 1-byte references
# to that value, about 64 MB of decoded fields a frame.
BOMB_PATH = b"/hello"
BOMB_PSEUDO = (b"\x82\x86"  # :method GET, :scheme http
               + b"\x04" + bytes([len(BOMB_PATH)]) + BOMB_PATH  # :path, not indexed
               + b"\x01\x09127.0.0.1")  # :authority, not indexed
BOMB_VALUE = 4000


def bomb_setup_block():
    """The request that stores the value: a literal field with incremental
    indexing and a new name ("x-bomb"), its value's length as HPACK's
    7-bit-prefix integer."""
    n = BOMB_VALUE - 127
    return (BOMB_PSEUDO + b"\x40\x06x-bomb\x7f" + bytes([(n % 128) | 0x80, n // 128]) +
            b"a" * BOMB_VALUE)


def bomb_block():
    return BOMB_PSEUDO + b"\xbe" * (16384 - len(BOMB_PSEUDO))


def scenario_hpack_bomb(port):
    """One stored value, then up to $BOMBS (300) bomb frames on new streams
    until a GOAWAY: `goaway=CODE last_stream=ID sent=N` and how many
    streams were answered 431 before it."""
    raw = Raw(port)
    raw.sock.sendall(HeadersFrame(1, data=bomb_setup_block(),
                                  flags=["END_HEADERS", "END_STREAM"]).serialize())
    raw.read_until(lambda: 1 in raw.ended or raw.goaway is not None, "the first answer")
    check(raw.statuses.get(1) == "200", "the request that stores the value: %r" %
          raw.statuses.get(1))
    bombs = int(os.environ.get("BOMBS", "300"))
    frames = [HeadersFrame(3 + 2 * i, data=bomb_block(), flags=["END_HEADERS", "END_STREAM"])
              for i in range(bombs)]
    sent = raw.flood(frames, batch=10, pause_after=2)
    report_goaway(raw, sent)
    print("answered_431=%d" % sum(v == "431" for v in raw.statuses.values()))


def run(scenarios):
    """Runs the scenario named by argv[1] (scenario_NAME in `scenarios`, a
    module's globals()) against the port in argv[2]."""
    scenario, port = sys.argv[1], int(sys.argv[2])
    try:
        scenarios["scenario_" + scenario.replace("-", "_")](port)
    except (Failure, OSError, h2.exceptions.H2Error) as e:
        print("FAILED %s: %r" % (scenario, e))
        sys.exit(1)


if __name__ == "__main__":
    run(globals())
