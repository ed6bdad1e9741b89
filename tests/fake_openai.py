"""A fake OpenAI-compatible model server on loopback, for end-to-end tests that need a model
to be slow, repeat itself or answer a script: `/v1/models`, `/v1/embeddings` (word-hash
vectors, tests/model_fakes.py) and `/v1/chat/completions` (a scripted expansion). The project's
remote-model adapters talk to it as to any other server.

Each test takes its own subclass from `serve`, so the class attributes it sets (delays, the
script) and the counts it reads are its own."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

from tests.model_fakes import FakeEmbedder


class FakeOpenAI(BaseHTTPRequestHandler):
    url = ""  # the server's `/v1` base, once it listens
    models: tuple[str, ...] = ("hashed",)
    embed_delay_s = 0.0
    chat_delay_s = 0.0
    # what the chat endpoint answers, as `{"queries": …}`; none: it answers 404
    expansion: ClassVar[list[dict[str, str]]] = []
    chats = 0

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            listed = [{"id": name, "object": "model"} for name in type(self).models]
            self._send(200, {"object": "list", "data": listed})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.rstrip("/")
        if path == "/v1/embeddings":
            time.sleep(type(self).embed_delay_s)
            vectors = FakeEmbedder(dimensions=32).embed_queries(json.loads(raw)["input"])
            data = [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ]
            self._send(200, {"object": "list", "data": data, "model": "hashed"})
        elif path == "/v1/chat/completions" and type(self).expansion:
            type(self).chats += 1
            time.sleep(type(self).chat_delay_s)
            content = json.dumps({"queries": type(self).expansion})
            choice = {"index": 0, "message": {"role": "assistant", "content": content}}
            self._send(200, {"object": "chat.completion", "choices": [choice]})
        else:
            self._send(404, {"error": {"message": "not found"}})


def serve(**settings: Any) -> tuple[ThreadingHTTPServer, type[FakeOpenAI]]:
    """A listening fake with its own subclass carrying `settings`; shut the server down after."""
    handler: type[FakeOpenAI] = type("Handler", (FakeOpenAI,), dict(settings))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_port}/v1"
    return server, handler
