"""A real Envoy RLS client (Debian's python3-grpcio, run with /usr/bin/python3)
for tests/gateway/decision/decision_gateway_test.cc: it calls
envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit over cleartext
HTTP/2 to 127.0.0.1:PORT through the stubs that protoc and
grpc_python_plugin generate from the project's own .proto files
(gateway/decision/proto), which the build writes into --stubs DIR.

`rls_client.py --stubs DIR [--tls CERT [--cert CERT --key KEY]] PORT CALL...`
makes the calls one after the other on one channel (over TLS with --tls,
trusting the PEM certificate CERT, whose name must be `localhost`; with
--cert and --key presenting that client certificate). Each CALL is a JSON
object:

  {"domain": "edge",
   "descriptors": [{"entries": [["key", "value"], ...], "hits_addend": 3,
                    "limit": [5, "MINUTE"]}],   # the descriptor's own limit
   "hits_addend": 2,         # the request's; omitted: 0
   "unknown": true,          # unknown fields appended to the message
   "raw": "hex",             # these bytes as the message instead
   "method": "/pkg.Svc/M"}   # another method (raw bytes, no stubs)

or {"wait_for": "PATH"}: no call; prints `I waiting` and goes on once the
file PATH exists (within 30 s), so that a test can change the gateway (a
reload) between two calls of one channel, that is one HTTP/2 connection.

For call I (from 0) it prints, in one write:
  I code=OK overall=OK|OVER_LIMIT
  I status J code=OK|OVER_LIMIT [limit=NAME RPU/UNIT remaining=R reset_ms=MS]
  I header NAME: VALUE
  I body TEXT
or `I code=NAME details=D` for a call that ended with another gRPC status.
"""

import argparse
import json
import os
import sys
import time

import grpc

METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def load_stubs(directory):
    sys.path.insert(0, directory)
    try:
        from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
        from envoy.type.v3 import ratelimit_unit_pb2
    except ImportError as e:
        sys.exit("rls_client.py: no stubs generated from gateway/decision/proto (%s): build "
                 "the test (it runs protoc) and pass --stubs DIR" % e)
    return rls_pb2, rls_pb2_grpc, ratelimit_unit_pb2


def build(rls_pb2, units, call):
    """The call's RateLimitRequest."""
    request = rls_pb2.RateLimitRequest(domain=call.get("domain", ""),
                                       hits_addend=call.get("hits_addend", 0))
    for d in call.get("descriptors", []):
        descriptor = request.descriptors.add()
        for key, value in d.get("entries", []):
            descriptor.entries.add(key=key, value=value)
        if "hits_addend" in d:
            descriptor.hits_addend.value = d["hits_addend"]
        if "limit" in d:
            requests_per_unit, unit = d["limit"]
            descriptor.limit.requests_per_unit = requests_per_unit
            descriptor.limit.unit = units.RateLimitUnit.Value(unit)
    return request


# Field 100 (varint 7), field 101 (3 bytes), field 102 (fixed64): what a
# newer Envoy could send.
UNKNOWN_FIELDS = b"\xa0\x06\x07" + b"\xaa\x06\x03new" + b"\xb1\x06" + b"\x01" * 8


def describe(i, rls_pb2, response):
    code = rls_pb2.RateLimitResponse.Code.Name
    unit = rls_pb2.RateLimitResponse.RateLimit.Unit.Name
    lines = ["%d code=OK overall=%s" % (i, code(response.overall_code))]
    for j, status in enumerate(response.statuses):
        line = "%d status %d code=%s" % (i, j, code(status.code))
        if status.HasField("current_limit"):
            limit = status.current_limit
            reset = status.duration_until_reset
            line += " limit=%s %d/%s remaining=%d reset_ms=%d" % (
                limit.name, limit.requests_per_unit, unit(limit.unit), status.limit_remaining,
                reset.seconds * 1000 + reset.nanos // 1_000_000)
        lines.append(line)
    for header in response.response_headers_to_add:
        lines.append("%d header %s: %s" % (i, header.key, header.value))
    if response.raw_body:
        lines.append("%d body %s" % (i, response.raw_body.decode().rstrip("\n")))
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stubs", required=True)
    parser.add_argument("--tls")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("port", type=int)
    parser.add_argument("calls", nargs="+")
    args = parser.parse_args()
    rls_pb2, rls_pb2_grpc, units = load_stubs(args.stubs)
    if args.tls:
        with open(args.tls, "rb") as f:
            root = f.read()
        chain = key = None
        if args.cert:
            with open(args.cert, "rb") as f:
                chain = f.read()
            with open(args.key, "rb") as f:
                key = f.read()
        credentials = grpc.ssl_channel_credentials(root_certificates=root, private_key=key,
                                                   certificate_chain=chain)
        channel = grpc.secure_channel("localhost:%d" % args.port, credentials)
    else:
        channel = grpc.insecure_channel("127.0.0.1:%d" % args.port)
    with channel:
        stub = rls_pb2_grpc.RateLimitServiceStub(channel)
        for i, text in enumerate(args.calls):
            call = json.loads(text)
            if "wait_for" in call:
                sys.stdout.write("%d waiting\n" % i)
                sys.stdout.flush()
                deadline = time.monotonic() + 30
                while not os.path.exists(call["wait_for"]) and time.monotonic() < deadline:
                    time.sleep(0.01)
                continue
            try:
                if "raw" in call or "method" in call or call.get("unknown"):
                    # Bytes as they are, past the stub's serializer.
                    method = channel.unary_unary(call.get("method", METHOD))
                    payload = (bytes.fromhex(call["raw"]) if "raw" in call else
                               build(rls_pb2, units, call).SerializeToString() + UNKNOWN_FIELDS)
                    reply = rls_pb2.RateLimitResponse.FromString(method(payload, timeout=10))
                else:
                    reply = stub.ShouldRateLimit(build(rls_pb2, units, call), timeout=10)
                lines = describe(i, rls_pb2, reply)
            except grpc.RpcError as e:
                lines = ["%d code=%s details=%s" % (i, e.code().name, e.details())]
            sys.stdout.write("".join(line + "\n" for line in lines))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
