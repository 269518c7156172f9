#!/usr/bin/python3
"""Loads blocks and overrides into a tollgate through its admin API, for
bench/ratelimit.sh --admin-load: none of them applies to the benchmark's
load (wrk from 127.0.0.1, no user, no X-Api-Key).

Usage: admin_load.py ADMIN_PORT BLOCKS OVERRIDES RULE
The admin token is read from $TOLLGATE_ADMIN_TOKEN. Blocks are a quarter
each IPv4 /24 networks (10.0.0.0/8), IPv6 /48 networks (2001:db8::/32),
users and X-Api-Key values; overrides give RULE's keys of addresses in
198.18.0.0/15 (a key = "ip" rule, token_bucket) other limits. Everything
lasts an hour. Exits non-zero, saying why, if a call fails or the lists
do not hold what was loaded.
"""
import http.client
import json
import os
import sys
import time

# Blocks or overrides per PUT: an array of them, within the API's 64 KiB
# bodies.
PER_CALL = 400


def main():
    port, blocks, overrides, rule = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    auth = {"Authorization": "Bearer " + os.environ["TOLLGATE_ADMIN_TOKEN"]}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(method, path, body=None):
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=auth)
        res = conn.getresponse()
        data = res.read()
        if res.status != 200:
            sys.exit(f"admin_load.py: {method} {path}: {res.status} {data[:300]!r}")
        return json.loads(data)

    start = time.monotonic()
    batch = []
    for i in range(blocks):
        kind = i % 4
        n = i // 4
        if kind == 0:
            block = {"ip": f"10.{n >> 8 & 255}.{n & 255}.0/24"}
        elif kind == 1:
            block = {"ip": f"2001:db8:{n:x}::/48"}
        elif kind == 2:
            block = {"user": f"user-{n}"}
        else:
            block = {"header": {"X-Api-Key": f"key-{n}"}}
        block["ttl"] = "1h"
        batch.append(block)
        if len(batch) == PER_CALL or i + 1 == blocks:
            call("PUT", "/api/v1/blocks", batch)
            batch = []
    for i in range(overrides):
        batch.append({"rule": rule,
                      "key": {"ip": f"198.{18 + (i >> 16 & 1)}.{i >> 8 & 255}.{i & 255}"},
                      "limits": [{"limit": 1000, "window": "1s", "burst": 1000}],
                      "ttl": "1h"})
        if len(batch) == PER_CALL or i + 1 == overrides:
            call("PUT", "/api/v1/overrides", batch)
            batch = []
    listed_blocks = len(call("GET", "/api/v1/blocks")["blocks"])
    listed_overrides = len(call("GET", "/api/v1/overrides")["overrides"])
    if listed_blocks != blocks or listed_overrides != overrides:
        sys.exit(f"admin_load.py: {listed_blocks} blocks and {listed_overrides} overrides listed, "
                 f"{blocks} and {overrides} loaded")
    print(f"loaded {blocks} blocks and {overrides} overrides in {time.monotonic() - start:.1f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
