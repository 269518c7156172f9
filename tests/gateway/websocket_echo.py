#!/usr/bin/python3
# A WebSocket echo server for the gateway tests (Debian's python3-websockets;
# run with /usr/bin/python3). Listens on 127.0.0.1, on the port given as its
# argument or a free one, and prints "port N" on stderr once it accepts. Every message comes back as it came
# (text as text, binary as binary); the text "close-me" is answered with a
# close frame of code 4001, reason "bye". With --deflate it accepts
# permessage-deflate (compressed messages set RSV1). Runs until killed.
import asyncio
import sys

import websockets


async def echo(ws, path=None):
    try:
        async for message in ws:
            if message == "close-me":
                await ws.close(code=4001, reason="bye")
                return
            await ws.send(message)
    except websockets.ConnectionClosed:
        pass


async def main():
    args = [a for a in sys.argv[1:] if a != "--deflate"]
    port = int(args[0]) if args else 0
    compression = "deflate" if "--deflate" in sys.argv[1:] else None
    async with websockets.serve(echo, "127.0.0.1", port, max_size=4 << 20, ping_interval=None,
                                compression=compression) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"port {port}", file=sys.stderr, flush=True)
        await asyncio.Future()


asyncio.run(main())
