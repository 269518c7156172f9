"""HTTP/2 requests whose head or trailers the gateway must check as it
checks HTTP/1.1's (tests/gateway/http2/request_head_test.cc), against the
real gateway in front of the echo upstream: `h2_head_peer.py SCENARIO PORT`.
Built on h2_peer.py's Client (python3-h2, run with /usr/bin/python3), with
its outbound checks off so that malformed heads are sent as they are.
"""

import json

from h2_peer import Client, check, headers_dict, run


def pseudo(method="GET", scheme="http", authority="127.0.0.1", path="/_test/headers"):
    return [(":method", method), (":scheme", scheme), (":authority", authority), (":path", path)]


# Each malformed head: a name printed with the status it got.
MALFORMED = {
    "userinfo": pseudo(authority="user:pw@api.example.com"),
    "at_host": pseudo(authority="api.example.com@evil.example"),
    "double_port": pseudo(authority="a:80:80"),
    "lowercase_method": pseudo(method="get"),
    "ftp_scheme": pseudo(scheme="ftp"),
    "fragment": pseudo(path="/_test/headers#frag"),
}


def scenario_malformed_heads(port):
    """Prints name=status for each malformed head, then good=status for a
    well-formed one on the same connection."""
    c = Client(port, validate=False)
    for name, head in MALFORMED.items():
        sid = c.request(None, None, pseudo=head)
        c.wait_done(sid)
        s = c.streams[sid]
        check(s.reset is None, "%s: stream reset (%r)" % (name, s.reset))
        print("%s=%s" % (name, s.status().decode()))
    sid = c.request("GET", "/_test/headers")
    c.wait_done(sid)
    print("good=%s" % c.streams[sid].status().decode())


# Trailers a client may not slip past the header's rules, and one it may.
FORGED_TRAILERS = [
    ("x-client-cert-subject", "CN=forged"), ("x-client-cert-sha256", "forged"),
    ("x-user-id", "forged"), ("x-user-role", "forged"), ("x_user_id", "forged"),
    ("x-real-ip", "forged"), ("x-forwarded-for", "forged"), ("forwarded", "for=forged"),
    ("authorization", "Bearer forged"), ("cookie", "forged=1"), ("x-checksum", "kept"),
]


def scenario_trailers(port):
    """A POST with a body and FORGED_TRAILERS; prints the status and the
    fields the upstream saw (header and trailers), as JSON."""
    c = Client(port, validate=False)
    sid = c.request("POST", "/_test/headers", body=b"hello", trailers=FORGED_TRAILERS)
    c.wait_done(sid)
    s = c.streams[sid]
    check(s.reset is None, "stream reset (%r)" % (s.reset,))
    print("status=%s" % s.status().decode())
    print("seen=%s" % json.dumps(json.loads(bytes(s.data))))


if __name__ == "__main__":
    run(globals())
