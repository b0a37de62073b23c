"""A local OpenAI-compatible chat server for tests: the real HTTP API, including SSE streaming.

    with OpenAIServer() as server:
        server.reply = lambda body: "text"      # or set server.fail_status / server.delay
        ... RAG_LLM_BASE_URL=server.base_url ...
        server.requests                          # every request body received, in order
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def default_reply(body: dict[str, Any]) -> str:
    """Condense requests get a standalone question; answers cite reference 1."""
    last = body["messages"][-1]["content"]
    if "Standalone question:" in last:
        follow_up = last.split("Follow-up question:", 1)[1].split("\n", 1)[0].strip()
        first_user = next((ln[len("User: "):] for ln in last.splitlines() if ln.startswith("User: ")), "")
        return f"{first_user} {follow_up}".strip()
    return f"Answer to: {last} [1]. It uses several words so streaming has pieces."


class OpenAIServer:
    """POST /v1/chat/completions (JSON or `stream: true` SSE) and GET /v1/models on 127.0.0.1."""

    def __init__(self, model: str = "test-model") -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.reply: Callable[[dict[str, Any]], str] = default_reply
        self.fail_status: int | None = None
        self.delay = 0.0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": server.model, "object": "model",
                                                                 "owned_by": "test"}]})
                else:
                    self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
                    return
                if server.delay:
                    time.sleep(server.delay)
                if server.fail_status:
                    self._json(server.fail_status, {"error": {"message": "model crashed (test)",
                                                              "type": "server_error", "code": None}})
                    return
                text = server.reply(body)
                ident, created = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())
                if body.get("stream"):
                    self._stream(ident, created, text)
                    return
                self._json(200, {
                    "id": ident, "object": "chat.completion", "created": created, "model": body.get("model"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop", "logprobs": None}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": len(text.split()),
                              "total_tokens": 10 + len(text.split())},
                })

            def _stream(self, ident: str, created: int, text: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                words = text.split(" ")
                pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
                first = True
                for piece in pieces:
                    delta: dict[str, Any] = {"content": piece}
                    if first:
                        delta["role"] = "assistant"
                        first = False
                    self._event({"id": ident, "object": "chat.completion.chunk", "created": created,
                                 "model": server.model,
                                 "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                self._event({"id": ident, "object": "chat.completion.chunk", "created": created, "model": server.model,
                             "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _event(self, payload: dict[str, Any]) -> None:
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def reset(self) -> None:
        self.requests.clear()
        self.reply = default_reply
        self.fail_status = None
        self.delay = 0.0

    def __enter__(self) -> "OpenAIServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
