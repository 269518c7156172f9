#!/usr/bin/python3
"""Time to the first event of a streamed chat completion, for bench/cost.sh:
N requests one after another to URL (OpenAI-shaped, "stream": true), each on
a new connection; prints the median and the 90th percentile of the time from
sending the request to reading the first "data:" line, in ms:
"p50_ms=A p90_ms=B".

Usage: sse_ttfb.py URL N
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
    body = json.dumps({"model": "gpt-4o-mini", "max_tokens": 16, "stream": True,
                       "messages": [{"role": "user", "content": "Say hi."}]}).encode()
    request = (f"POST {url.path} HTTP/1.1\r\nHost: bench\r\nX-Team: bench\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
               "Connection: close\r\n\r\n").encode() + body
    times = []
    for _ in range(n):
        sock = socket.create_connection((url.hostname, url.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        sock.sendall(request)
        seen = b""
        while b"data:" not in seen:
            piece = sock.recv(65536)
            if not piece:
                break
            seen += piece
        times.append((time.perf_counter() - start) * 1000)
        sock.close()
    times.sort()
    print(f"p50_ms={statistics.median(times):.3f} p90_ms={times[int(len(times) * 0.9)]:.3f}")


main()
