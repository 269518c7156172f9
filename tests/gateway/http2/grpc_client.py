"""A real gRPC client (Debian's python3-grpcio, run with /usr/bin/python3)
for tests/gateway/e2e/http2_gateway_test.cc and grpc_test.cc; the channel is
cleartext HTTP/2 to 127.0.0.1:PORT.

`grpc_client.py PORT /METHOD N [TIMEOUT_S]` makes N unary calls of METHOD
one after the other, each with the 5-byte message `hello`: raw bytes, no
stubs, for any method of any service (gateway_test.cc calls methods of no
gRPC server, which the gateway answers itself or relays as its upstream
answers).

`grpc_client.py PORT MODE [ARGS...] [--service S] [--timeout T] [--calls N]
[--metadata KEY=VALUE]... [--stubs DIR]` calls a method of echo.proto's
service S (default tollgate.test.Echo, which grpc_upstream.py serves; also
tollgate.test.Down, which nobody serves) through the stubs protoc and
grpc_python_plugin generate from echo.proto (echo_pb2, echo_pb2_grpc, from
DIR, where the build writes them, or else from the Python path), N times
(default 1) one after the other:

  unary [TEXT]           Unary with TEXT (default `hello`)
  server-stream COUNT    ServerStream: COUNT replies
  client-stream M...     ClientStream: the messages M..., then the end; its
                         reply is printed as `COUNT:M1,M2,...`
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

import echo_stubs


def text(value):
    return "hex:" + value.hex() if isinstance(value, bytes) else value


def reply_text(reply):
    """A reply as one line: Text's text, Joined as `COUNT:T1,T2,...`."""
    if hasattr(reply, "texts"):
        return "%d:%s" % (reply.count, ",".join(reply.texts))
    return reply.text


def report(i, call, replies=()):
    lines = ["%d reply=%s" % (i, reply_text(r)) for r in replies]
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


def unary_call(method, request, timeout, metadata):
    try:
        reply, call = method.with_call(request, timeout=timeout, metadata=metadata)
        return call, [reply]
    except grpc.RpcError as e:
        return e, []


def server_stream_call(method, request, timeout, metadata):
    call = method(request, timeout=timeout, metadata=metadata)
    replies = []
    try:
        for reply in call:
            replies.append(reply)
    except grpc.RpcError:
        pass  # the call itself carries the status
    return call, replies


def client_stream_call(method, requests, timeout, metadata):
    try:
        reply, call = method.with_call(iter(requests), timeout=timeout, metadata=metadata)
        return call, [reply]
    except grpc.RpcError as e:
        return e, []


def bidi_call(method, make_request, count, timeout, metadata):
    """Ping-pong: each message waits for the reply to the one before."""
    outbox = queue.Queue()

    def requests():
        while True:
            message = outbox.get()
            if message is None:
                return
            yield message

    if count > 0:
        outbox.put(make_request("ping 0"))
    else:
        outbox.put(None)
    call = method(requests(), timeout=timeout, metadata=metadata)
    replies = []
    try:
        for reply in call:
            replies.append(reply)
            outbox.put(make_request("ping %d" % len(replies)) if len(replies) < count else None)
    except grpc.RpcError:
        pass
    finally:
        outbox.put(None)  # the sending thread may still wait for a message
    return call, replies


def legacy(argv):
    port, method, calls = int(argv[1]), argv[2], int(argv[3])
    timeout = float(argv[4]) if len(argv) > 4 else 10.0
    with grpc.insecure_channel("127.0.0.1:%d" % port) as channel:
        # No (de)serializers: the message is the bytes `hello`.
        unary = channel.unary_unary(method)
        for i in range(calls):
            call, _ = unary_call(unary, b"hello", timeout, None)
            report(i, call)


def main():
    sys.stdout.reconfigure(encoding="utf-8")
    # The legacy form: a port, then a method path (`--stubs DIR` first is
    # the other form).
    if len(sys.argv) > 2 and sys.argv[1].isdigit() and sys.argv[2].startswith("/"):
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
    parser.add_argument("--stubs", metavar="DIR",
                        help="the directory of echo_pb2.py and echo_pb2_grpc.py")
    a = parser.parse_args()
    metadata = [tuple(m.split("=", 1)) for m in a.metadata] or None
    echo_pb2, echo_pb2_grpc = echo_stubs.load(a.stubs)
    package, _, name = a.service.rpartition(".")
    stub_class = getattr(echo_pb2_grpc, name + "Stub", None)
    if package != "tollgate.test" or stub_class is None:
        sys.exit("grpc_client.py: no service %s in echo.proto" % a.service)
    Text = echo_pb2.Text

    with grpc.insecure_channel("127.0.0.1:%d" % a.port) as channel:
        stub = stub_class(channel)

        def method(name):
            if not hasattr(stub, name):
                sys.exit("grpc_client.py: %s has no method %s" % (a.service, name))
            return getattr(stub, name)

        for i in range(a.calls):
            if a.mode == "unary":
                call, replies = unary_call(
                    method("Unary"), Text(text=a.args[0] if a.args else "hello"),
                    a.timeout, metadata)
            elif a.mode == "server-stream":
                call, replies = server_stream_call(
                    method("ServerStream"), echo_pb2.Count(count=int(a.args[0])),
                    a.timeout, metadata)
            elif a.mode == "client-stream":
                call, replies = client_stream_call(
                    method("ClientStream"), [Text(text=m) for m in a.args], a.timeout,
                    metadata)
            elif a.mode == "bidi":
                call, replies = bidi_call(
                    method("Bidi"), lambda t: Text(text=t), int(a.args[0]), a.timeout,
                    metadata)
            elif a.mode == "fail":
                call, replies = unary_call(
                    method("Fail"),
                    echo_pb2.FailRequest(code=a.args[0] if a.args else "NOT_FOUND"),
                    a.timeout, metadata)
            else:
                call, replies = unary_call(method("Slow"), Text(text="slow"), a.timeout,
                                           metadata)
            report(i, call, replies)


if __name__ == "__main__":
    main()
