#!/usr/bin/python3
"""Time to the first event of a streamed chat completion, for bench/cost.sh:
N requests one after another to URL (OpenAI-shaped, "stream": true), each
read to its end; prints the median and the 90th percentile of the time from
sending the request to reading the first "data:" line, in ms:
"p50_ms=A p90_ms=B". With --new-connections each request opens a
connection of its own (and closes it); without, one keep-alive connection
carries them all (the response must be chunked).

Usage: sse_ttfb.py URL N [--new-connections]
"""
import json
import socket
import statistics
import sys
import time
import urllib.parse


def main():
    url = urllib.parse.urlsplit(sys.argv[1])
    n = int(sys.argv[2])
    fresh = "--new-connections" in sys.argv[3:]
    body = json.dumps({"model": "gpt-4o-mini", "max_tokens": 16, "stream": True,
                       "messages": [{"role": "user", "content": "Say hi."}]}).encode()
    request = (f"POST {url.path} HTTP/1.1\r\nHost: bench\r\nX-Team: bench\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
               + ("Connection: close\r\n" if fresh else "") + "\r\n").encode() + body
    times = []
    sock = None
    for _ in range(n):
        if sock is None:
            sock = socket.create_connection((url.hostname, url.port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        sock.sendall(request)
        seen = b""
        while b"data:" not in seen:
            piece = sock.recv(65536)
            if not piece:
                raise SystemExit("the connection closed before the first event")
            seen += piece
        times.append((time.perf_counter() - start) * 1000)
        # The rest of the stream, as a client reads it: a proxy whose client
        # left mid-stream would give up its upstream connection.
        if fresh:
            while sock.recv(65536):
                pass
            sock.close()
            sock = None
        else:
            while not seen.endswith(b"0\r\n\r\n"):
                piece = sock.recv(65536)
                if not piece:
                    raise SystemExit("the connection closed within a response")
                seen += piece
    times.sort()
    print(f"p50_ms={statistics.median(times):.3f} p90_ms={times[int(len(times) * 0.9)]:.3f}")


main()
