#!/usr/bin/python3
"""Closed-loop load of LLM requests for bench/cost.sh: CLIENTS threads, each
sending REQUESTS chat completions (OpenAI-shaped, with X-Team: TEAM) one
after another to URL; prints the tokens the admitted responses say they used
(their usage.total_tokens summed), then the admitted and refused counts:
"tokens=T admitted=A refused=R".

Usage: cost_load.py URL CLIENTS REQUESTS [MAX_TOKENS]
"""
import http.client
import json
import sys
import threading
import urllib.parse


def main():
    url = urllib.parse.urlsplit(sys.argv[1])
    clients, requests = int(sys.argv[2]), int(sys.argv[3])
    max_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    body = json.dumps({"model": "gpt-4o-mini", "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": "Say hi."}]})
    lock = threading.Lock()
    totals = {"tokens": 0, "admitted": 0, "refused": 0}

    def client():
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        for _ in range(requests):
            conn.request("POST", url.path, body, {"Content-Type": "application/json",
                                                  "X-Team": "bench"})
            res = conn.getresponse()
            data = res.read()
            with lock:
                if res.status == 200:
                    totals["tokens"] += json.loads(data)["usage"]["total_tokens"]
                    totals["admitted"] += 1
                else:
                    totals["refused"] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("tokens={tokens} admitted={admitted} refused={refused}".format(**totals))


main()
