"""A real gRPC client (Debian's python3-grpcio, run with /usr/bin/python3)
for tests/gateway/http2/gateway_test.cc: `grpc_client.py PORT METHOD N
[TIMEOUT_S]` makes N unary calls of METHOD one after the other over one
channel (cleartext HTTP/2), each with a raw 5-byte message (no protobuf:
the gateway does not look into messages), and prints each call's status
code, details and trailing metadata."""

import sys

import grpc


def main():
    port, method, calls = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 10.0
    with grpc.insecure_channel("127.0.0.1:%d" % port) as channel:
        call = channel.unary_unary(method)  # bytes in, bytes out
        for i in range(calls):
            try:
                call(b"hello", timeout=timeout)
                print("%d code=OK" % i)
            except grpc.RpcError as e:
                print("%d code=%s details=%s" % (i, e.code().name, e.details()))
                for key, value in e.trailing_metadata() or ():
                    print("%d trailer %s=%s" % (i, key, value))


if __name__ == "__main__":
    main()
