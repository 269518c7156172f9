#!/usr/bin/python3
"""Open-loop HTTP/1.1 load for bench/adaptive.sh.

Sends GET PATH to 127.0.0.1:PORT at RATE requests per second for SECONDS
(after WARMUP seconds sent the same way and not counted), whatever the
answers: a request does not wait for an earlier one, as real clients do
not (wrk's closed loop would make every configuration look alike: its
latency is connections ÷ throughput wherever the queue is). Each request
takes an idle keep-alive connection or opens one; a request not answered
within TIMEOUT seconds is given up (its connection closed) and counts as a
timeout, as a client's deadline would.

Prints one line: "goodput p50_ms p99_ms refused timeouts sent", goodput
being the 2xx answers within TIMEOUT per second, p50 and p99 their
latencies, refused the non-2xx answers.
"""

import argparse
import asyncio
import statistics
import time


class Load:
    def __init__(self, port, path, timeout):
        self.port = port
        self.request = (f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n").encode()
        self.timeout = timeout
        self.idle = []
        self.counting = False
        self.latencies = []
        self.refused = 0
        self.timeouts = 0
        self.sent = 0

    async def exchange(self, reader, writer):
        writer.write(self.request)
        await writer.drain()
        status_line = await reader.readline()
        length = 0
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length:
            await reader.readexactly(length)
        return int(status_line.split()[1])

    async def one(self):
        counted = self.counting
        if counted:
            self.sent += 1
        start = time.monotonic()
        conn = self.idle.pop() if self.idle else None
        try:
            if conn is None:
                conn = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", self.port), self.timeout)
            left = self.timeout - (time.monotonic() - start)
            status = await asyncio.wait_for(self.exchange(*conn), max(left, 0.001))
        except (asyncio.TimeoutError, OSError, ValueError, IndexError,
                asyncio.IncompleteReadError):
            if conn is not None:
                conn[1].close()
            if counted:
                self.timeouts += 1
            return
        self.idle.append(conn)
        if not counted:
            return
        if 200 <= status < 300:
            self.latencies.append((time.monotonic() - start) * 1000)
        else:
            self.refused += 1

    async def run(self, rate, seconds, warmup):
        tasks = set()
        interval = 1.0 / rate
        begin = time.monotonic()
        n = 0
        while True:
            due = begin + n * interval
            now = time.monotonic()
            if now >= begin + warmup + seconds:
                break
            if due > now:
                await asyncio.sleep(due - now)
            self.counting = due >= begin + warmup
            task = asyncio.ensure_future(self.one())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            n += 1
        if tasks:
            await asyncio.wait(tasks)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("port", type=int)
    p.add_argument("path")
    p.add_argument("rate", type=float)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=5)
    p.add_argument("--timeout", type=float, default=1.0)
    a = p.parse_args()
    load = Load(a.port, a.path, a.timeout)
    asyncio.run(load.run(a.rate, a.seconds, a.warmup))
    lat = sorted(load.latencies)
    p50 = statistics.median(lat) if lat else 0
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else 0
    print(f"{len(lat) / a.seconds:.0f} {p50:.3f} {p99:.3f} {load.refused} {load.timeouts} {load.sent}")


if __name__ == "__main__":
    main()
