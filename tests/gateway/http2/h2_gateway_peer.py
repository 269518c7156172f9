"""HTTP/2 clients for tests/gateway/e2e/http2_gateway_test.cc, against the real
gateway in front of the echo upstream: `h2_gateway_peer.py SCENARIO PORT`.
Built on h2_peer.py's Client (python3-h2, run with /usr/bin/python3). Each
scenario prints what it saw as `key=value` lines and exits 0, or prints the
problem and exits 1.
"""

import os
import time

from h2.settings import SettingCodes
from hyperframe.frame import PingFrame

from h2_peer import CANCEL, NO_ERROR, Client, Raw, check, headers_dict, run

GRPC = [("content-type", "application/grpc"), ("te", "trailers")]
# A gRPC message frame: not compressed, 5 bytes of (meaningless) payload.
MESSAGE = b"\x00\x00\x00\x00\x05hello"


def grpc_call(c, path, extra=()):
    sid = c.request("POST", path, GRPC + list(extra), body=MESSAGE)
    c.wait_done(sid)
    s = c.streams[sid]
    check(s.reset is None, "stream %d reset (%r)" % (sid, s.reset))
    return s


def report_grpc(name, s):
    """Prints the gRPC status of a call: from the trailers, or from the only
    header of a trailers-only response."""
    h = headers_dict(s.headers)
    t = headers_dict(s.trailers)
    status = t.get("grpc-status", h.get("grpc-status"))
    message = t.get("grpc-message", h.get("grpc-message", ""))
    print("%s_http=%s" % (name, h.get(":status")))
    print("%s_grpc_status=%s" % (name, status))
    print("%s_grpc_message=%s" % (name, message))
    print("%s_trailers_only=%d" % (name, int(s.trailers is None and not s.data)))
    for field in ("retry-after", "ratelimit-policy", "ratelimit", "x-ratelimit-remaining"):
        if field in h:
            print("%s_%s=%s" % (name, field, h[field]))


def scenario_grpc_limited(port):
    """Two gRPC calls against a limit of one: the first reaches the upstream
    (its trailers relayed), the second is answered by tollgate."""
    c = Client(port)
    report_grpc("first", grpc_call(c, "/_test/trailers"))
    report_grpc("second", grpc_call(c, "/_test/trailers"))


def scenario_grpc_unavailable(port):
    c = Client(port)
    report_grpc("down", grpc_call(c, "/down/pkg.Service/Method"))


def scenario_grpc_deadline(port):
    c = Client(port)
    report_grpc("slow", grpc_call(c, "/_test/sleep/3000", [("grpc-timeout", "200m")]))


def scenario_reload_between_streams(port):
    """Two requests on one connection; between them the test reloads the
    configuration, and creates the file named by $RELOADED when done."""
    c = Client(port)
    first = c.request("GET", "/api/hello")
    c.wait_done(first)
    print("first=%s" % c.streams[first].status().decode(), flush=True)
    deadline = time.monotonic() + 20
    while not os.path.exists(os.environ["RELOADED"]):
        check(time.monotonic() < deadline, "no reload")
        time.sleep(0.01)
    second = c.request("GET", "/api/hello")
    c.wait_done(second)
    print("second=%s" % c.streams[second].status().decode())


def scenario_zero_window(port):
    """A client whose windows start shut (SETTINGS_INITIAL_WINDOW_SIZE 0)
    and never opens stream A's: A's response header comes, its body cannot,
    and the gateway resets A (CANCEL) when its write times out
    (client_body). Stream B, whose window is opened, is answered meanwhile
    on the same connection, and stream C after the reset. `stalled` is
    printed while A waits: the test runs other clients then."""
    c = Client(port)
    c.conn.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.flush()
    c.round_trip()  # the gateway has applied the setting
    a = c.request("GET", "/_test/bytes/100000")
    c.no_ack.add(a)
    c.wait(lambda: c.streams[a].headers is not None or c.streams[a].done(), "A's response")
    check(c.streams[a].status() == b"200", "A: %r" % c.streams[a].status())

    def opened(path):
        sid = c.request("GET", path)
        c.conn.increment_flow_control_window(65535, stream_id=sid)
        c.flush()
        c.wait_done(sid)
        s = c.streams[sid]
        check(s.status() == b"200" and bytes(s.data) == b"hello from upstream\n",
              "%s: %r %r (reset %r)" % (path, s.status(), bytes(s.data[:40]), s.reset))

    opened("/api/hello")
    print("stalled", flush=True)
    c.wait_done(a)
    sa = c.streams[a]
    check(sa.reset == CANCEL, "A after the stall: reset %r, ended %r" % (sa.reset, sa.ended))
    check(not sa.data, "A got %d bytes through a shut window" % len(sa.data))
    opened("/api/hello")
    print("stalled_reset=%d" % sa.reset)


def scenario_zero_window_many(port):
    """A client whose windows start shut asks for 1 MB on $STREAMS (100)
    streams at once and opens no window: each answer's header comes, its
    body cannot. Once every stream has its header (and the streams the
    gateway would not hold, their reset: all but $HELD_AT_MOST) `stalled
    held=N reset=M` is printed, and the connection stays until the file
    $RELEASE exists."""
    c = Client(port)
    c.conn.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.flush()
    c.round_trip()
    c.lift_stream_limit()
    n = int(os.environ.get("STREAMS", "100"))
    sids = [c.request("GET", "/_test/bytes/1000000") for _ in range(n)]
    c.no_ack.update(sids)
    c.wait(lambda: all(c.streams[s].headers is not None or c.streams[s].done() for s in sids),
           "every answer's header")
    # A stream it will not hold the gateway resets once the answer's body
    # reaches it, which may be any time after the header: wait for the
    # resets the bound calls for (a gateway holding more never sends them,
    # and the read's timeout ends the wait).
    at_most = int(os.environ.get("HELD_AT_MOST", str(n)))
    c.wait(lambda: sum(c.streams[s].reset is not None for s in sids) >= n - at_most,
           "the resets beyond %d held streams" % at_most)
    c.round_trip()
    c.round_trip()
    reset = sum(c.streams[s].reset is not None for s in sids)
    print("stalled held=%d reset=%d" % (n - reset, reset), flush=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(os.environ["RELEASE"]):
        check(time.monotonic() < deadline, "never released")
        time.sleep(0.01)


class PingingRaw(Raw):
    """Raw frames, counting the ACKs of our PINGs."""

    def __init__(self, port):
        self.pings = 0
        super().__init__(port)

    def on_frame(self, frame):
        if frame.type == 0x6 and "ACK" in frame.flags:
            self.pings += 1
        super().on_frame(frame)


def scenario_drain(port):
    """A slow request in flight while the gateway drains: it is answered,
    the connection ends with GOAWAY NO_ERROR naming it, then closes. The
    test drains once `started` is printed. (Raw frames: h2 treats the first
    GOAWAY as the end of the connection.)"""
    raw = PingingRaw(port)
    sid = 1
    raw.sock.sendall(raw.headers(sid, "/_test/sleep/700").serialize() +
                     PingFrame(0, opaque_data=b"started!").serialize())
    raw.read_until(lambda: raw.pings, "the PING's ACK")
    print("started", flush=True)
    raw.read_until(lambda: raw.goaway is not None and sid in raw.ended, "GOAWAY and the answer")
    check(raw.goaways[-1] == (NO_ERROR, sid), "final GOAWAY: %r" % (raw.goaways,))
    raw.read_until(lambda: raw.closed, "the server's close")
    print("status=%s goaway=%d" % (raw.statuses.get(sid), raw.goaways[-1][0]))


if __name__ == "__main__":
    run(globals())
