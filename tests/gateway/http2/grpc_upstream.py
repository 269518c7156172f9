"""A real gRPC server (Debian's python3-grpcio, run with /usr/bin/python3)
as the upstream of tests/gateway/e2e/grpc_gateway_test.cc:
`grpc_upstream.py [PORT] [--stats FILE] [--tls CERT KEY] [--stubs DIR]`.

Listens on 127.0.0.1:PORT (a free port when PORT is 0 or absent) over
cleartext HTTP/2 with prior knowledge (h2c), or over TLS (ALPN h2) with
--tls, prints `port=N` on stderr, and serves until killed. It serves the
service `tollgate.test.Echo` of echo.proto through the stubs protoc and
grpc_python_plugin generate from it (echo_pb2, echo_pb2_grpc): the build
writes them into a directory of the build tree, given with --stubs DIR
(otherwise they are imported from the Python path). Echo:

  Unary         the request back, with initial metadata `x-upstream:
                grpc_upstream`, every request metadata `x-test-*` echoed in
                the initial metadata, and trailing metadata `x-trailer: unary`
  ServerStream  Count N: N replies `reply I`
  ClientStream  one reply once the client has ended its side: the number of
                messages and their texts
  Bidi          `echo:` + each message, sent as soon as it arrives (the
                client can wait for a reply before sending the next message)
  Fail          aborts with the status named by the request (`NOT_FOUND`
                if empty), details `failed on purpose: 100% sure, ünïcode`
                (percent-encoded on the wire by grpcio) and trailing metadata
                `x-fail-reason: chosen` and `x-fail-detail-bin` (binary)
  Slow          never answers: waits until the call is cancelled (the
                client's deadline, relayed by the gateway as RST_STREAM or
                as a closed connection)

With --stats FILE, the calls each method received, and the Slow calls that
ended cancelled (`Slow.cancelled`), are written to FILE as JSON after each
event, so that a test can tell what reached the upstream.
"""

import argparse
import json
import os
import sys
import threading
from concurrent import futures

import grpc

import echo_stubs

FAIL_MESSAGE = "failed on purpose: 100% sure, \u00fcn\u00efcode"
FAIL_DETAIL = b"\x00\x01\xfe\xff"
# A Slow call that is never cancelled ends by itself after this long, so
# that a server nobody cancels does not keep a thread forever.
SLOW_LIMIT_S = 60

lock = threading.Lock()
stats = {}
stats_path = None


def save():
    if stats_path:
        tmp = stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(stats, f)
        os.replace(tmp, stats_path)


def count(key):
    with lock:
        stats[key] = stats.get(key, 0) + 1
        save()


def make_servicer(echo_pb2, echo_pb2_grpc):
    class Echo(echo_pb2_grpc.EchoServicer):
        def Unary(self, request, context):
            count("Unary")
            echoed = [(k, v) for k, v in context.invocation_metadata()
                      if k.startswith("x-test-")]
            context.send_initial_metadata([("x-upstream", "grpc_upstream")] + echoed)
            context.set_trailing_metadata([("x-trailer", "unary")])
            return request

        def ServerStream(self, request, context):
            count("ServerStream")
            for i in range(request.count):
                yield echo_pb2.Text(text="reply %d" % i)
            context.set_trailing_metadata([("x-trailer", "server-stream")])

        def ClientStream(self, request_iterator, context):
            count("ClientStream")
            texts = [m.text for m in request_iterator]
            context.set_trailing_metadata([("x-trailer", "client-stream")])
            return echo_pb2.Joined(count=len(texts), texts=texts)

        def Bidi(self, request_iterator, context):
            count("Bidi")
            for message in request_iterator:
                yield echo_pb2.Text(text="echo:" + message.text)
            context.set_trailing_metadata([("x-trailer", "bidi")])

        def Fail(self, request, context):
            count("Fail")
            code = grpc.StatusCode[request.code or "NOT_FOUND"]
            context.set_trailing_metadata(
                [("x-fail-reason", "chosen"), ("x-fail-detail-bin", FAIL_DETAIL)])
            context.abort(code, FAIL_MESSAGE)

        def Slow(self, request, context):
            count("Slow")
            cancelled = threading.Event()
            context.add_callback(cancelled.set)
            if cancelled.wait(SLOW_LIMIT_S) or not context.is_active():
                count("Slow.cancelled")
            return request

    return Echo()


def main():
    global stats_path
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int, nargs="?", default=0)
    parser.add_argument("--stats")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--stubs", metavar="DIR",
                        help="the directory of echo_pb2.py and echo_pb2_grpc.py")
    args = parser.parse_args()
    echo_pb2, echo_pb2_grpc = echo_stubs.load(args.stubs)
    stats_path = args.stats
    save()
    # Slow calls hold a thread each until cancelled: room for many.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    echo_pb2_grpc.add_EchoServicer_to_server(make_servicer(echo_pb2, echo_pb2_grpc), server)
    address = "127.0.0.1:%d" % args.port
    if args.tls:
        with open(args.tls[0], "rb") as cert, open(args.tls[1], "rb") as key:
            credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
        port = server.add_secure_port(address, credentials)
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        sys.exit("cannot listen on 127.0.0.1:%d" % args.port)
    server.start()
    sys.stderr.write("port=%d\n" % port)
    sys.stderr.flush()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
