"""A real gRPC client (Debian's python3-grpcio, run with /usr/bin/python3)
for tests/gateway/http2/gateway_test.cc and grpc_test.cc. Messages are raw
bytes (no protobuf: the gateway does not look into messages); the channel
is cleartext HTTP/2 to 127.0.0.1:PORT.

`grpc_client.py PORT /METHOD N [TIMEOUT_S]` makes N unary calls of METHOD
one after the other, each with the 5-byte message `hello`.

`grpc_client.py PORT MODE [ARGS...] [--service S] [--timeout T] [--calls N]
[--metadata KEY=VALUE]...` calls a method of grpc_upstream.py's service S
(default tollgate.test.Echo), N times (default 1) one after the other:

  unary [TEXT]           Unary with TEXT (default `hello`)
  server-stream COUNT    ServerStream: COUNT replies
  client-stream M...     ClientStream: the messages M..., then the end
  bidi COUNT             Bidi as ping-pong: `ping I` is sent only once the
                         reply to `ping I-1` has arrived, so COUNT replies
                         come only through a relay that forwards each
                         message as it comes (a buffering one ends in the
                         deadline)
  fail [CODE]            Fail, asking for status CODE (default NOT_FOUND)
  slow                   Slow, which answers only once cancelled: give a
                         short --timeout

For call I (from 0) it prints `I reply=R` for each reply, `I initial K=V`
and `I trailer K=V` for the metadata (binary values as `hex:...`), then
`I code=OK`, or `I code=NAME details=D` for any other status: the lines of
a call in one write, so that clients run at once can share a pipe.
"""

import argparse
import queue
import sys

import grpc


def text(value):
    return "hex:" + value.hex() if isinstance(value, bytes) else value


def report(i, call, replies=()):
    lines = ["%d reply=%s" % (i, r.decode(errors="backslashreplace")) for r in replies]
    for key, value in call.initial_metadata() or ():
        lines.append("%d initial %s=%s" % (i, key, text(value)))
    for key, value in call.trailing_metadata() or ():
        lines.append("%d trailer %s=%s" % (i, key, text(value)))
    code = call.code()
    if code == grpc.StatusCode.OK:
        lines.append("%d code=OK" % i)
    else:
        lines.append("%d code=%s details=%s" % (i, code.name, call.details()))
    # One write for the whole call: clients run at once on one pipe (and
    # PYTHONUNBUFFERED makes print() write a line and its newline apart)
    # must not interleave their lines.
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def unary_call(channel, method, message, timeout, metadata):
    try:
        reply, call = channel.unary_unary(method).with_call(
            message, timeout=timeout, metadata=metadata)
        return call, [reply]
    except grpc.RpcError as e:
        return e, []


def server_stream_call(channel, method, count, timeout, metadata):
    call = channel.unary_stream(method)(count.encode(), timeout=timeout, metadata=metadata)
    replies = []
    try:
        for reply in call:
            replies.append(reply)
    except grpc.RpcError:
        pass  # the call itself carries the status
    return call, replies


def client_stream_call(channel, method, messages, timeout, metadata):
    try:
        reply, call = channel.stream_unary(method).with_call(
            iter([m.encode() for m in messages]), timeout=timeout, metadata=metadata)
        return call, [reply]
    except grpc.RpcError as e:
        return e, []


def bidi_call(channel, method, count, timeout, metadata):
    """Ping-pong: each message waits for the reply to the one before."""
    outbox = queue.Queue()

    def requests():
        while True:
            message = outbox.get()
            if message is None:
                return
            yield message

    if count > 0:
        outbox.put(b"ping 0")
    else:
        outbox.put(None)
    call = channel.stream_stream(method)(requests(), timeout=timeout, metadata=metadata)
    replies = []
    try:
        for reply in call:
            replies.append(reply)
            outbox.put(b"ping %d" % len(replies) if len(replies) < count else None)
    except grpc.RpcError:
        pass
    finally:
        outbox.put(None)  # the sending thread may still wait for a message
    return call, replies


def legacy(argv):
    port, method, calls = int(argv[1]), argv[2], int(argv[3])
    timeout = float(argv[4]) if len(argv) > 4 else 10.0
    with grpc.insecure_channel("127.0.0.1:%d" % port) as channel:
        for i in range(calls):
            call, _ = unary_call(channel, method, b"hello", timeout, None)
            report(i, call)


def main():
    sys.stdout.reconfigure(encoding="utf-8")
    if len(sys.argv) > 2 and sys.argv[2].startswith("/"):
        return legacy(sys.argv)
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("mode", choices=[
        "unary", "server-stream", "client-stream", "bidi", "fail", "slow"])
    parser.add_argument("args", nargs="*")
    parser.add_argument("--service", default="tollgate.test.Echo")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--metadata", action="append", default=[])
    a = parser.parse_args()
    metadata = [tuple(m.split("=", 1)) for m in a.metadata] or None

    def method(name):
        return "/%s/%s" % (a.service, name)

    with grpc.insecure_channel("127.0.0.1:%d" % a.port) as channel:
        for i in range(a.calls):
            if a.mode == "unary":
                message = (a.args[0] if a.args else "hello").encode()
                call, replies = unary_call(channel, method("Unary"), message, a.timeout, metadata)
            elif a.mode == "server-stream":
                call, replies = server_stream_call(
                    channel, method("ServerStream"), a.args[0], a.timeout, metadata)
            elif a.mode == "client-stream":
                call, replies = client_stream_call(
                    channel, method("ClientStream"), a.args, a.timeout, metadata)
            elif a.mode == "bidi":
                call, replies = bidi_call(
                    channel, method("Bidi"), int(a.args[0]), a.timeout, metadata)
            elif a.mode == "fail":
                code = (a.args[0] if a.args else "NOT_FOUND").encode()
                call, replies = unary_call(channel, method("Fail"), code, a.timeout, metadata)
            else:
                call, replies = unary_call(channel, method("Slow"), b"slow", a.timeout, metadata)
            report(i, call, replies)


if __name__ == "__main__":
    main()
