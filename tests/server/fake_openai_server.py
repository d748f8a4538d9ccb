#!/usr/bin/env python3
"""A small OpenAI-compatible server with known timing, written with the standard library only.

It is not Lathe: tests point `lathe bench serve` at it to show that the load generator works with
any OpenAI-compatible server, and that the latencies it reports are the ones the server produced.

Every request waits --ttft-ms before its first token, then sends one token every --itl-ms until it
has sent max_tokens (or max_completion_tokens; default 16). Token i is the text "t<i> ". Responses
use HTTP/1.0 framing (the body ends when the connection closes), unlike Lathe's chunked responses.

GET /v1/models lists --model; GET /stats returns {"requests": N, "tokens": M} (generation requests
served and tokens sent so far).
"""
import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATS = {"requests": 0, "tokens": 0}
STATS_LOCK = threading.Lock()


def make_handler(args):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, fmt, *a):  # quiet
            pass

        def send_json(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/v1/models":
                self.send_json(200, {"object": "list",
                                     "data": [{"id": args.model, "object": "model", "owned_by": "test"}]})
            elif self.path == "/stats":
                with STATS_LOCK:
                    self.send_json(200, dict(STATS))
            elif self.path == "/health":
                self.send_json(200, {})
            else:
                self.send_json(404, {"error": {"message": "no such route", "type": "invalid_request_error",
                                               "param": None, "code": None}})

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            try:
                req = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                req = None
            chat = self.path == "/v1/chat/completions"
            if self.path not in ("/v1/completions", "/v1/chat/completions") or not isinstance(req, dict):
                self.send_json(400, {"error": {"message": "bad request", "type": "invalid_request_error",
                                               "param": None, "code": None}})
                return
            n = req.get("max_completion_tokens") or req.get("max_tokens") or 16
            if chat:
                prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in req.get("messages", []))
            else:
                p = req.get("prompt", "")
                prompt_tokens = len(p) if isinstance(p, list) else len(str(p).split())
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
            obj = "chat.completion.chunk" if chat else "text_completion"
            with STATS_LOCK:
                STATS["requests"] += 1
                STATS["tokens"] += n
            time.sleep(args.ttft_ms / 1000.0)
            if not req.get("stream"):
                time.sleep(args.itl_ms * (n - 1) / 1000.0)
                text = "".join("t%d " % i for i in range(n))
                choice = {"index": 0, "finish_reason": "length", "logprobs": None}
                if chat:
                    choice["message"] = {"role": "assistant", "content": text}
                else:
                    choice["text"] = text
                self.send_json(200, {"id": "x", "object": "chat.completion" if chat else "text_completion",
                                     "created": int(time.time()), "model": args.model, "choices": [choice],
                                     "usage": usage})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for i in range(n):
                if i > 0:
                    time.sleep(args.itl_ms / 1000.0)
                choice = {"index": 0, "logprobs": None, "finish_reason": "length" if i == n - 1 else None}
                if chat:
                    choice["delta"] = {"content": "t%d " % i}
                else:
                    choice["text"] = "t%d " % i
                chunk = {"id": "x", "object": obj, "created": int(time.time()), "model": args.model,
                         "choices": [choice]}
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()
            if (req.get("stream_options") or {}).get("include_usage"):
                chunk = {"id": "x", "object": obj, "created": int(time.time()), "model": args.model,
                         "choices": [], "usage": usage}
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model", default="fake-python-model")
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args))
    server.daemon_threads = True
    print("fake OpenAI server on http://127.0.0.1:%d" % args.port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
