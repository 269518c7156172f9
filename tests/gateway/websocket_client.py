#!/usr/bin/python3
# WebSocket client scenarios for the gateway tests (Debian's
# python3-websockets; run with /usr/bin/python3), against
# tests/gateway/websocket_echo.py behind tollgate.
#
#   websocket_client.py URL SCENARIO [ARG] [--cafile FILE] [--header NAME:VALUE]...
#
# Prints what it saw on stdout, one fact a line, and exits 0 when the
# scenario went as expected (1 otherwise, with the reason on stderr).
#   messages       text and binary messages of 0 B ... 1 MiB, both ways
#   fragmented     fragmented text and binary messages come back whole
#   ping           a ping gets its pong
#   close          the client's close handshake (1000), then the server's
#                  (4001 "bye")
#   many N         N tunnels open at once, each echoing, then all closed
#   hold N SECONDS N tunnels opened one after another: prints "open I" or
#                  "refused I STATUS" for each, then keeps the open ones
#                  for SECONDS
#   idle SECONDS   no byte either way: prints "closed after S" once the
#                  connection ends (or fails after SECONDS)
#   send N STYLE   N messages one after another, each awaiting its echo;
#                  STYLE: plain, fragmented (each in 3 fragments) or pinged
#                  (3 pings answered before each): prints "echoed I" for
#                  each, then "closed CODE REASON after I" when the
#                  connection closes (I: the messages echoed) or "all echoed"
#   burst N        N messages sent at once, then their echoes awaited, in
#                  order: prints "received K in S" (seconds from the first
#                  send to the last echo), and "closed CODE REASON" if the
#                  connection closed first
#   oversize BYTES one binary message of BYTES: prints "closed CODE REASON"
#                  once the connection closes (or "echoed" if it came back)
import asyncio
import os
import ssl
import sys
import time

import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatusCode


def fail(reason):
    print(reason, file=sys.stderr, flush=True)
    sys.exit(1)


class Options:
    def __init__(self, argv):
        self.cafile = None
        self.headers = []
        self.args = []
        i = 0
        while i < len(argv):
            if argv[i] == "--cafile":
                self.cafile = argv[i + 1]
                i += 2
            elif argv[i] == "--header":
                name, value = argv[i + 1].split(":", 1)
                self.headers.append((name, value.strip()))
                i += 2
            else:
                self.args.append(argv[i])
                i += 1


def connect(url, opts, **kwargs):
    extra = {}
    if url.startswith("wss:"):
        context = ssl.create_default_context(cafile=opts.cafile)
        extra["ssl"] = context
    return websockets.connect(url, max_size=4 << 20, ping_interval=None,
                              extra_headers=opts.headers, open_timeout=10, **extra, **kwargs)


async def messages(url, opts):
    async with connect(url, opts) as ws:
        for size in [0, 1, 125, 126, 127, 65535, 65536, 100_000, 1 << 20]:
            text = ("abcdefghij" * (size // 10 + 1))[:size]
            await ws.send(text)
            back = await ws.recv()
            if back != text:
                fail(f"text of {size} bytes came back different")
            data = os.urandom(size)
            await ws.send(data)
            back = await ws.recv()
            if back != data:
                fail(f"binary of {size} bytes came back different")
            print(f"echoed {size}")


async def fragmented(url, opts):
    async with connect(url, opts) as ws:
        parts = ["first ", "second ", "x" * 70_000, " last"]
        await ws.send(parts)
        back = await ws.recv()
        if back != "".join(parts):
            fail("fragmented text came back different")
        blobs = [os.urandom(n) for n in (1, 300, 65_536, 5)]
        await ws.send(blobs)
        back = await ws.recv()
        if back != b"".join(blobs):
            fail("fragmented binary came back different")
        print("fragmented ok")


async def ping(url, opts):
    async with connect(url, opts) as ws:
        for i in range(3):
            pong = await ws.ping(f"p{i}".encode())
            await asyncio.wait_for(pong, 5)
        print("pong ok")


async def close(url, opts):
    ws = await connect(url, opts)
    await ws.send("hello")
    await ws.recv()
    await ws.close(code=1000, reason="done")
    await ws.wait_closed()
    if ws.close_code != 1000:
        fail(f"client close: code {ws.close_code}")
    print(f"client close {ws.close_code}")
    ws = await connect(url, opts)
    await ws.send("close-me")
    try:
        await ws.recv()
        fail("the server's close did not arrive")
    except ConnectionClosed as e:
        print(f"server close {e.rcvd.code} {e.rcvd.reason}")
        if e.rcvd.code != 4001 or e.rcvd.reason != "bye":
            fail("wrong close frame")


async def many(url, opts, n):
    conns = await asyncio.gather(*(connect(url, opts) for _ in range(n)))

    async def one(i, ws):
        message = f"tunnel {i} " + "y" * (i * 37)
        await ws.send(message)
        if await ws.recv() != message:
            fail(f"tunnel {i} echoed something else")

    await asyncio.gather(*(one(i, ws) for i, ws in enumerate(conns)))
    print(f"open {len(conns)}")
    await asyncio.gather(*(ws.close() for ws in conns))
    print(f"closed {sum(1 for ws in conns if ws.close_code == 1000)}")


async def hold(url, opts, n, seconds):
    held = []
    for i in range(n):
        try:
            ws = await connect(url, opts)
            await ws.send("hi")
            await ws.recv()
            held.append(ws)
            print(f"open {i}", flush=True)
        except InvalidStatusCode as e:
            print(f"refused {i} {e.status_code}", flush=True)
    await asyncio.sleep(seconds)
    for ws in held:
        await ws.close()


async def idle(url, opts, seconds):
    ws = await connect(url, opts)
    start = time.monotonic()
    try:
        await asyncio.wait_for(ws.recv(), seconds)
        fail("a message arrived")
    except ConnectionClosed:
        print(f"closed after {time.monotonic() - start:.2f}")
    except asyncio.TimeoutError:
        fail(f"still open after {seconds} s")


def closed(e):
    """'CODE REASON' of the close frame received, or 'none'."""
    if e.rcvd is None:
        return "none"
    return f"{e.rcvd.code} {e.rcvd.reason}"


async def send(url, opts, n, style):
    async with connect(url, opts) as ws:
        for i in range(n):
            message = f"message {i}"
            try:
                if style == "pinged":
                    for k in range(3):
                        await asyncio.wait_for(await ws.ping(f"{i}.{k}".encode()), 5)
                if style == "fragmented":
                    await ws.send([message[:3], message[3:6], message[6:]])
                else:
                    await ws.send(message)
                back = await asyncio.wait_for(ws.recv(), 10)
            except ConnectionClosed as e:
                print(f"closed {closed(e)} after {i}", flush=True)
                return
            if back != message:
                fail(f"message {i} came back as {back!r}")
            print(f"echoed {i}", flush=True)
        print("all echoed")


async def burst(url, opts, n):
    async with connect(url, opts) as ws:
        start = time.monotonic()
        received = 0
        try:
            for i in range(n):
                await ws.send(f"burst {i}")
            for i in range(n):
                back = await asyncio.wait_for(ws.recv(), 30)
                if back != f"burst {i}":
                    fail(f"echo {i} was {back!r}")
                received += 1
        except ConnectionClosed as e:
            print(f"closed {closed(e)}", flush=True)
        print(f"received {received} in {time.monotonic() - start:.3f}")


async def oversize(url, opts, size):
    async with connect(url, opts) as ws:
        try:
            await ws.send(os.urandom(size))
            await asyncio.wait_for(ws.recv(), 10)
            print("echoed")
        except ConnectionClosed as e:
            print(f"closed {closed(e)}")


async def main():
    opts = Options(sys.argv[1:])
    url, scenario = opts.args[0], opts.args[1]
    rest = opts.args[2:]
    if scenario == "messages":
        await messages(url, opts)
    elif scenario == "fragmented":
        await fragmented(url, opts)
    elif scenario == "ping":
        await ping(url, opts)
    elif scenario == "close":
        await close(url, opts)
    elif scenario == "many":
        await many(url, opts, int(rest[0]))
    elif scenario == "hold":
        await hold(url, opts, int(rest[0]), float(rest[1]))
    elif scenario == "idle":
        await idle(url, opts, float(rest[0]))
    elif scenario == "send":
        await send(url, opts, int(rest[0]), rest[1])
    elif scenario == "burst":
        await burst(url, opts, int(rest[0]))
    elif scenario == "oversize":
        await oversize(url, opts, int(rest[0]))
    else:
        fail(f"unknown scenario {scenario}")


asyncio.run(main())
