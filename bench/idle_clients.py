#!/usr/bin/python3
"""Idle clients for bench/idle_memory.sh and tests/gateway/idle_memory_test.

Opens COUNT connections of one KIND to 127.0.0.1:PORT, makes one exchange on
each (a GET of PATH, or one WebSocket message each way), leaves them all open
and idle, and reads the server process's resident memory (VmRSS of
/proc/PID/status) before the first connection and once all are idle: the
growth divided by COUNT is the memory an idle connection costs the server.
Then, after IDLE seconds with nothing sent, one more exchange on each of up
to SAMPLE connections, timed ("first": on a connection that was idle), and
at once another on the same ones ("warm"). Every exchange must succeed.

Prints one line of name=value fields:
  connections, rss_before_kb, rss_idle_kb, bytes_per_connection,
  first_p50_ms, first_p99_ms, warm_p50_ms, warm_p99_ms, served
(served: exchanges answered after the idle time, on every connection).

KIND: http1 (keep-alive HTTP/1.1), https (the same over TLS 1.3), h2c (HTTP/2
with prior knowledge), h2 (HTTP/2 over TLS, ALPN h2), ws (a WebSocket
handshake, then text messages echoed by the upstream).
Needs Debian's python3-h2 for h2c and h2 (run with /usr/bin/python3).
"""

import argparse
import base64
import os
import resource
import socket
import ssl
import statistics
import struct
import sys
import time


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def recv_exact(sock, n, buf):
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed by the server")
        buf += chunk
    return buf


class Http1:
    """One keep-alive HTTP/1.1 connection (optionally TLS)."""

    def __init__(self, sock, host, path):
        self.sock = sock
        self.request = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\n"
                        "User-Agent: idle-clients\r\n\r\n").encode()
        self.buf = b""

    def exchange(self):
        self.sock.sendall(self.request)
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the server")
            self.buf += chunk
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        rest = recv_exact(self.sock, length, rest)
        self.buf = rest[length:]
        if status != 200:
            raise RuntimeError(f"status {status}")


class Http2:
    """One HTTP/2 connection (h2c prior knowledge, or TLS with ALPN h2)."""

    def __init__(self, sock, host, path):
        import h2.config
        import h2.connection
        import h2.events
        self.events = h2.events
        self.sock = sock
        self.conn = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.headers = [(":method", "GET"), (":scheme", "http"), (":authority", host),
                        (":path", path), ("user-agent", "idle-clients")]

    def exchange(self):
        stream = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream, self.headers, end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        status = None
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            for event in self.conn.receive_data(data):
                if isinstance(event, self.events.ResponseReceived) and event.stream_id == stream:
                    status = dict(event.headers)[":status"]
                elif isinstance(event, self.events.DataReceived):
                    self.conn.acknowledge_received_data(event.flow_controlled_length,
                                                        event.stream_id)
                elif isinstance(event, self.events.StreamEnded) and event.stream_id == stream:
                    self.sock.sendall(self.conn.data_to_send())
                    if status != "200":
                        raise RuntimeError(f"status {status}")
                    return
                elif isinstance(event, (self.events.StreamReset,
                                        self.events.ConnectionTerminated)):
                    raise RuntimeError(f"HTTP/2: {event}")
            pending = self.conn.data_to_send()
            if pending:
                self.sock.sendall(pending)


class WebSocket:
    """One WebSocket tunnel: the handshake, then a 32-byte text message echoed."""

    def __init__(self, sock, host, path):
        self.sock = sock
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                      "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed during the handshake")
            buf += chunk
        head, _, self.buf = buf.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(f"handshake: {head.splitlines()[0]!r}")
        self.payload = b"x" * 32

    def exchange(self):
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(self.payload))
        self.sock.sendall(struct.pack("!BB", 0x81, 0x80 | len(self.payload)) + mask + masked)
        buf = recv_exact(self.sock, 2, self.buf)
        length = buf[1] & 0x7F
        buf = recv_exact(self.sock, 2 + length, buf)
        if buf[2:2 + length] != self.payload:
            raise RuntimeError("echo differs")
        self.buf = buf[2 + length:]


def connect(kind, port, host, path, tls_context):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if kind in ("https", "h2"):
        sock = tls_context.wrap_socket(sock, server_hostname="localhost")
    if kind in ("h2c", "h2"):
        return Http2(sock, host, path)
    if kind == "ws":
        return WebSocket(sock, host, path)
    return Http1(sock, host, path)


def timed(clients):
    times = []
    for client in clients:
        start = time.perf_counter()
        client.exchange()
        times.append((time.perf_counter() - start) * 1000)
    return times


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", required=True, choices=["http1", "https", "h2c", "h2", "ws"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True, help="the server process to measure")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--path", default="/api/hello")
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--idle", type=float, default=1.0, help="seconds idle before the timing")
    parser.add_argument("--settle", type=float, default=0.5,
                        help="seconds between the last exchange and the memory reading")
    parser.add_argument("--sample", type=int, default=1000)
    args = parser.parse_args()

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tls_context = ssl.create_default_context()
    tls_context.check_hostname = False
    tls_context.verify_mode = ssl.CERT_NONE
    tls_context.minimum_version = ssl.TLSVersion.TLSv1_3
    if args.kind == "h2":
        tls_context.set_alpn_protocols(["h2"])

    before = rss_kb(args.pid)
    clients = []
    for _ in range(args.count):
        client = connect(args.kind, args.port, args.host, args.path, tls_context)
        client.exchange()
        clients.append(client)
    time.sleep(args.settle)
    idle = rss_kb(args.pid)
    time.sleep(max(0.0, args.idle - args.settle))
    sample = clients[:args.sample]
    first = timed(sample)
    warm = timed(sample)
    # Every connection is still served after its idle time.
    for client in clients[len(sample):]:
        client.exchange()
    print(f"connections={len(clients)} rss_before_kb={before} rss_idle_kb={idle} "
          f"bytes_per_connection={(idle - before) * 1024 / len(clients):.0f} "
          f"first_p50_ms={statistics.median(first):.3f} first_p99_ms={percentile(first, 0.99):.3f} "
          f"warm_p50_ms={statistics.median(warm):.3f} warm_p99_ms={percentile(warm, 0.99):.3f} "
          f"served={len(clients)}")


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # one line for the calling script
        print(f"idle_clients: {error}", file=sys.stderr)
        sys.exit(1)
