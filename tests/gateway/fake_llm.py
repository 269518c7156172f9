#!/usr/bin/python3
# A fake LLM API for the token-budget tests (Debian's python3, standard
# library only). Listens on 127.0.0.1 on a free port and prints "port N" on
# stderr once it accepts; runs until killed.
#
#   POST /v1/chat/completions  OpenAI chat completions: a JSON body, or with
#                              "stream": true a text/event-stream of chunks
#                              whose last one carries `usage` when
#                              stream_options.include_usage is true
#   POST /v1/messages          Anthropic messages: JSON, or a stream of
#                              message_start ... message_delta events
#   POST /v1/responses         OpenAI Responses API: JSON with `usage`, or a
#                              stream whose response.completed event has it
#   POST /v1/release           lets every stream waiting for it go on
#
# Usage is random but never beyond what the request allows: the prompt's
# tokens at most its body's bytes / 4 + 1, the completion's at most its
# output bound (max_tokens, max_completion_tokens, max_output_tokens). Every response says
# what it saw in the request (field "seen": the output bound and
# include_usage). Request headers that steer it:
#   X-Test-Usage: P,C       exactly P prompt and C completion tokens
#   X-Test-Cut: 1           the body is cut off (the connection closes early)
#   X-Test-Wait: 1          a stream stops after its first chunk until
#                           /v1/release is asked
import http.server
import itertools
import json
import random
import socket
import sys
import threading

release = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # Each event goes out when written, not after the last one's ACK.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length) if length > 0 else b""
        if self.path == "/v1/release":
            release.set()
            self.reply(200, "application/json", b"{}")
            return
        try:
            request = json.loads(raw)
        except ValueError:
            self.reply(400, "application/json", b'{"error":"not json"}')
            return
        bound = request.get("max_completion_tokens",
                            request.get("max_tokens", request.get("max_output_tokens")))
        options = request.get("stream_options") or {}
        seen = {"max_tokens": bound, "include_usage": bool(options.get("include_usage")),
                "bytes": len(raw)}
        fixed = self.headers.get("X-Test-Usage")
        if fixed:
            prompt, completion = (int(x) for x in fixed.split(","))
        else:
            prompt = random.randint(1, len(raw) // 4 + 1)
            completion = random.randint(1, max(1, int(bound or 16)))
        anthropic = self.path == "/v1/messages"
        stream = bool(request.get("stream"))
        if self.path == "/v1/responses":
            self.respond_responses(request, prompt, completion, seen, stream)
            return
        if stream:
            self.stream(anthropic, prompt, completion, seen, seen["include_usage"])
            return
        if anthropic:
            body = {"type": "message", "model": request.get("model"), "seen": seen,
                    "content": [{"type": "text", "text": "hi"}],
                    "usage": {"input_tokens": prompt, "output_tokens": completion}}
        else:
            body = {"object": "chat.completion", "model": request.get("model"), "seen": seen,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                              "total_tokens": prompt + completion}}
        data = json.dumps(body).encode()
        if self.headers.get("X-Test-Cut"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.reply(200, "application/json", data)

    def respond_responses(self, request, prompt, completion, seen, stream):
        usage = {"input_tokens": prompt, "output_tokens": completion,
                 "total_tokens": prompt + completion}
        if not stream:
            body = {"object": "response", "model": request.get("model"), "seen": seen,
                    "status": "completed", "output": [{"type": "message", "content": [
                        {"type": "output_text", "text": "hi"}]}], "usage": usage}
            self.reply(200, "application/json", json.dumps(body).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = [
            ("response.created", {"type": "response.created", "response": {
                "status": "in_progress", "seen": seen}}),
            ("response.output_text.delta", {"type": "response.output_text.delta",
                                            "delta": "hi"}),
            ("response.completed", {"type": "response.completed", "response": {
                "status": "completed", "usage": usage}}),
        ]
        for name, data in events:
            self.chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def reply(self, status, content_type, data):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def chunk(self, text):
        data = text.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def stream(self, anthropic, prompt, completion, seen, include_usage):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if anthropic:
            events = [
                ("message_start", {"type": "message_start", "seen": seen, "message": {
                    "usage": {"input_tokens": prompt, "output_tokens": 1}}}),
                ("content_block_delta", {"type": "content_block_delta",
                                         "delta": {"type": "text_delta", "text": "hi"}}),
                ("message_delta", {"type": "message_delta",
                                   "usage": {"output_tokens": completion}}),
                ("message_stop", {"type": "message_stop"}),
            ]
            texts = (f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
        else:
            chunks = [{"object": "chat.completion.chunk", "seen": seen,
                       "choices": [{"index": 0, "delta": {"content": "hi"}}], "usage": None},
                      {"object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                       "usage": None}]
            if include_usage:
                chunks.append({"object": "chat.completion.chunk", "choices": [], "usage": {
                    "prompt_tokens": prompt, "completion_tokens": completion,
                    "total_tokens": prompt + completion}})
            texts = itertools.chain((f"data: {json.dumps(c)}\n\n" for c in chunks),
                                    ["data: [DONE]\n\n"])
        # Each event is made as it is sent, as a model's server makes them:
        # a later event (the usage one) does not delay the first.
        count = len(events) if anthropic else len(chunks) + 1
        cut = bool(self.headers.get("X-Test-Cut"))
        for i, text in enumerate(texts):
            if cut and i == count - 2:
                self.close_connection = True
                return
            self.chunk(text)
            if i == 0 and self.headers.get("X-Test-Wait"):
                release.wait(10)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def main():
    server = Server(("127.0.0.1", 0), Handler)
    print(f"port {server.server_address[1]}", file=sys.stderr, flush=True)
    server.serve_forever()


main()
