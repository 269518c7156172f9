"""HTTP/2 upstream servers for tests/gateway/http2/upstream_test.cc and the
gateway's tests, on Debian's python3-h2 (run with /usr/bin/python3):
`upstream_peer.py SCENARIO STATS_FILE [--tls CERT KEY]`.

Listens on a free loopback port, prints `port=N` on stderr, and serves
each connection in a thread of its own until killed; with --tls over TLS
(ALPN h2). Every request is answered 200 with "hello PATH" as body, after
DELAY seconds (so that requests overlap), except as the scenario says:

  plain       just that
  max2        SETTINGS_MAX_CONCURRENT_STREAMS = 2
  goaway      the first connection, on its 4th request, sends GOAWAY with
              the 2nd request's id as last-stream-id, answers the streams up
              to it and closes; later connections serve normally
  refuse      the first request of the process is refused (RST_STREAM
              REFUSED_STREAM); the others are answered
  refuse_all  every request is refused
  silent      accepts connections and never sends a byte (no SETTINGS)
  echo        the answer has no content-length; its body is the request's
              body (or "hello PATH" when it has none), sent as flow control
              allows, then trailers: x-echo-bytes (the body's length) and
              x-trailer: done
  headers     the body is the request's header fields as a JSON object
              (name: value, pseudo-headers included)
  llm         an OpenAI chat completion's answer (application/json): its
              usage is P prompt and C completion tokens as the request's
              x-test-usage field says ("P,C"), and "seen" tells the
              request's max_tokens and body size
  knee        an upstream that slows as it fills (the echo upstream's
              /_test/knee/): a request to /knee/MS?capacity=C is answered
              after MS × max(k, C) ÷ C milliseconds, k being the requests
              in flight in the process when it arrived (itself included)

After each event the counters are written to STATS_FILE as JSON
(connections, streams, refused, max_concurrent: the most streams open at
once on one connection).
"""

import json
import os
import select
import socket
import ssl
import sys
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from hyperframe.frame import GoAwayFrame

DELAY = 0.05
TIMEOUT = 30

lock = threading.Lock()
stats = {"connections": 0, "streams": 0, "refused": 0, "max_concurrent": 0}
state = {"goaway_sent": False, "refused_once": False, "in_flight": 0}


def knee_delay(path):
    """knee: the answer's delay for `path` (/knee/MS?capacity=C), and the
    request counted in flight."""
    name, _, query = path.partition("?")
    ms = int(name.rsplit("/", 1)[-1] or 0)
    params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
    capacity = max(1, int(params.get("capacity", "8")))
    with lock:
        state["in_flight"] += 1
        k = state["in_flight"]
    return ms * max(k, capacity) / capacity / 1000.0


def save(path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(stats, f)
    os.replace(tmp, path)


def count(path, key, n=1):
    with lock:
        stats[key] += n
        save(path)


def serve(sock, scenario, stats_path):
    if scenario == "silent":
        sock.settimeout(TIMEOUT)
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass
        return
    initial = {}
    if scenario == "max2":
        initial[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 2
    conn = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.local_settings = h2.settings.Settings(client=False, initial_values=initial)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())

    with lock:
        goaway_here = scenario == "goaway" and not state["goaway_sent"]
        state["goaway_sent"] = state["goaway_sent"] or goaway_here
    paths = {}       # stream id -> path, requests not yet answered
    heads = {}       # stream id -> request header fields (headers)
    bodies = {}      # stream id -> request body so far (echo)
    sending = {}     # stream id -> [response body left, trailers] (echo)
    due = []         # (time, stream id) answers scheduled
    received = []    # request stream ids, in order
    last_stream = None  # our GOAWAY's last-stream-id
    open_streams = set()

    def answer(stream_id):
        body = ("hello " + paths.pop(stream_id)).encode()
        if scenario == "knee":
            with lock:
                state["in_flight"] -= 1
        if scenario == "headers":
            body = json.dumps(heads.pop(stream_id, {})).encode()
        content_type = []
        if scenario == "llm":
            raw = bytes(bodies.pop(stream_id, b""))
            prompt, completion = (int(x) for x in
                                  heads.pop(stream_id, {}).get("x-test-usage", "1,1").split(","))
            body = json.dumps({
                "object": "chat.completion",
                "seen": {"max_tokens": json.loads(raw or b"{}").get("max_tokens"),
                         "bytes": len(raw)},
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}}).encode()
            content_type = [("content-type", "application/json")]
        if scenario == "echo":
            body = bytes(bodies.pop(stream_id, b"")) or body
            conn.send_headers(stream_id, [(":status", "200")])
            sending[stream_id] = [body, [("x-echo-bytes", str(len(body))),
                                         ("x-trailer", "done")]]
            return
        conn.send_headers(stream_id, [(":status", "200"), ("content-length", str(len(body)))] +
                          content_type)
        conn.send_data(stream_id, body, end_stream=True)
        open_streams.discard(stream_id)

    def send_allowed():
        """Sends what the windows allow of the echo answers, then their
        trailers."""
        for stream_id in list(sending):
            body, trailers = sending[stream_id]
            while body:
                n = min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size,
                        len(body))
                if n <= 0:
                    break
                conn.send_data(stream_id, body[:n])
                body = body[n:]
            sending[stream_id][0] = body
            if not body:
                conn.send_headers(stream_id, trailers, end_stream=True)
                del sending[stream_id]
                open_streams.discard(stream_id)

    while True:
        now = time.monotonic()
        for when, stream_id in [d for d in due if d[0] <= now]:
            due.remove((when, stream_id))
            answer(stream_id)
        send_allowed()
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
        if last_stream is not None and not any(sid <= last_stream for sid in paths):
            # Everything up to the GOAWAY's last-stream-id is answered: end
            # the sending side and read until the client closes, so that
            # closing with unread bytes does not reset what was sent.
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(2)
            try:
                while sock.recv(65536):
                    pass
            except OSError:
                pass
            sock.close()
            return
        wait = min([d[0] for d in due], default=now + TIMEOUT) - now
        # TLS may hold decrypted bytes that select() does not see.
        readable = getattr(sock, "pending", lambda: 0)() > 0
        if not readable:
            readable, _, _ = select.select([sock], [], [], max(wait, 0))
        if not readable:
            if not due:
                return
            continue
        try:
            data = sock.recv(65536)
        except OSError:
            return
        if not data:
            return
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                headers = dict(event.headers)
                sid = event.stream_id
                count(stats_path, "streams")
                open_streams.add(sid)
                with lock:
                    stats["max_concurrent"] = max(stats["max_concurrent"], len(open_streams))
                    save(stats_path)
                refuse = scenario == "refuse_all"
                if scenario == "refuse":
                    with lock:
                        refuse = not state["refused_once"]
                        state["refused_once"] = True
                if refuse:
                    conn.reset_stream(sid, h2.errors.ErrorCodes.REFUSED_STREAM)
                    open_streams.discard(sid)
                    count(stats_path, "refused")
                    continue
                paths[sid] = headers.get(":path", "")
                if scenario in ("headers", "llm"):
                    heads[sid] = headers
                received.append(sid)
                if goaway_here and len(received) == 4 and last_stream is None:
                    # Written by hand: h2's close_connection() would forbid
                    # answering the streams the GOAWAY keeps.
                    last_stream = received[1]
                    sock.sendall(conn.data_to_send())
                    sock.sendall(GoAwayFrame(0, last_stream_id=last_stream).serialize())
                    for other in received[2:]:
                        paths.pop(other, None)
                        open_streams.discard(other)
                    due[:] = [d for d in due if d[1] <= last_stream]
            elif isinstance(event, h2.events.DataReceived):
                if scenario in ("echo", "llm"):
                    bodies.setdefault(event.stream_id, bytearray()).extend(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                sid = event.stream_id
                if sid in paths and (last_stream is None or sid <= last_stream):
                    delay = knee_delay(paths[sid]) if scenario == "knee" else DELAY
                    due.append((time.monotonic() + delay, sid))
            elif isinstance(event, h2.events.StreamReset):
                if scenario == "knee" and any(d[1] == event.stream_id for d in due):
                    due[:] = [d for d in due if d[1] != event.stream_id]
                    with lock:
                        state["in_flight"] -= 1
                paths.pop(event.stream_id, None)
                bodies.pop(event.stream_id, None)
                sending.pop(event.stream_id, None)
                open_streams.discard(event.stream_id)


def handshake_and_serve(sock, tls, scenario, stats_path):
    if tls is not None:
        try:
            sock = tls.wrap_socket(sock, server_side=True)
        except (OSError, ssl.SSLError):
            return
        if sock.selected_alpn_protocol() != "h2":
            sock.close()
            return
    serve(sock, scenario, stats_path)


def main():
    scenario, stats_path = sys.argv[1], sys.argv[2]
    tls = None
    if sys.argv[3:4] == ["--tls"]:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(sys.argv[4], sys.argv[5])
        tls.set_alpn_protocols(["h2"])
    save(stats_path)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    sys.stderr.write("port=%d\n" % listener.getsockname()[1])
    sys.stderr.flush()
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        count(stats_path, "connections")
        threading.Thread(target=handshake_and_serve, args=(sock, tls, scenario, stats_path),
                         daemon=True).start()


if __name__ == "__main__":
    main()
