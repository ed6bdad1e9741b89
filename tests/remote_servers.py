"""Real model servers for the remote-adapter tests, and a small HTTP shim in front of them.

`llama_cpp.server` (scripts/model_server.py) serves the prepared GGUF files on loopback: the
OpenAI-compatible adapters talk to it directly. Where it lacks an API, `Shim` (an in-test
HTTP server on another loopback port) stands in, always backed by the real server:

* Ollama's native API (`/api/tags`, `/api/embed`, `/api/chat`): no Ollama can be installed
  here (it is on no package registry this project may use), so the shim translates each call
  to the real server's OpenAI API and back; the vectors and texts are the real model's.
* `/v1/rerank` (Cohere/Jina/llama-server shape): scored by the cosine of the real MiniLM
  embeddings of query and document, mapped to [0, 1].
* Faults: `fail_next(n, status, retry_after)` answers the next n requests with that status;
  `delay` holds every answer back by that many seconds (a slow server).
Everything else is forwarded verbatim.
"""

from __future__ import annotations

import http.client
import json
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from scripts.model_server import CHAT_ALIAS, EMBED_ALIAS, ModelServer, start_server
from tests.model_fakes import prepared_model

__all__ = ["CHAT_ALIAS", "EMBED_ALIAS", "ModelServer", "Shim", "start_shim"]


@dataclass
class Shim:
    upstream_port: int
    port: int = 0
    failures: list[tuple[int, str | None]] = field(default_factory=list)
    delay: float = 0.0
    requests: list[tuple[float, str, int]] = field(default_factory=list)  # (time, path, status)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def v1(self) -> str:
        return f"{self.base_url}/v1"

    def fail_next(self, count: int, status: int = 429, retry_after: str | None = None) -> None:
        with self.lock:
            self.failures.extend([(status, retry_after)] * count)

    def reset(self) -> None:
        with self.lock:
            self.failures.clear()
            self.requests.clear()
            self.delay = 0.0

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    # ------------------------------------------------------------------ upstream calls

    def upstream(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes, dict[str, str]]:
        connection = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=120)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read(), dict(response.getheaders())
        finally:
            connection.close()

    def upstream_json(self, path: str, body: dict[str, Any], auth: str | None) -> Any:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = auth
        status, raw, _ = self.upstream("POST", path, json.dumps(body).encode(), headers)
        if status != 200:
            raise UpstreamError(status, raw)
        return json.loads(raw)


class UpstreamError(Exception):
    def __init__(self, status: int, raw: bytes) -> None:
        super().__init__(status)
        self.status = status
        self.raw = raw


def _bare(model: str) -> str:
    return model.removesuffix(":latest")


def _handler(shim: Shim) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            with shim.lock:
                shim.requests.append((time.monotonic(), self.path, status))
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(data).encode(), headers)

        def do_GET(self) -> None:
            self._handle("GET", None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self._handle("POST", self.rfile.read(length))

        def _handle(self, method: str, raw: bytes | None) -> None:
            if shim.delay:
                time.sleep(shim.delay)
            with shim.lock:
                failure = shim.failures.pop(0) if shim.failures else None
            if failure is not None:
                status, retry_after = failure
                headers = {"Retry-After": retry_after} if retry_after is not None else {}
                self._json(status, {"error": {"message": f"injected {status}"}}, headers)
                return
            auth = self.headers.get("Authorization")
            body = json.loads(raw) if raw else {}
            try:
                if self.path == "/api/tags":
                    listing = shim.upstream("GET", "/v1/models", None, {})[1]
                    names = [f"{m['id']}:latest" for m in json.loads(listing)["data"]]
                    self._json(200, {"models": [{"name": n, "model": n} for n in names]})
                elif self.path == "/api/embed":
                    data = shim.upstream_json(
                        "/v1/embeddings",
                        {"model": _bare(body["model"]), "input": body["input"]},
                        auth,
                    )
                    vectors = [
                        d["embedding"] for d in sorted(data["data"], key=lambda d: d["index"])
                    ]
                    self._json(200, {"model": body["model"], "embeddings": vectors})
                elif self.path == "/api/chat":
                    options = body.get("options", {})
                    request: dict[str, Any] = {
                        "model": _bare(body["model"]),
                        "messages": body["messages"],
                        "temperature": options.get("temperature", 0.8),
                        "seed": options.get("seed"),
                        "max_tokens": options.get("num_predict", 128),
                    }
                    if isinstance(body.get("format"), dict):
                        request["response_format"] = {
                            "type": "json_object",
                            "schema": body["format"],
                        }
                    data = shim.upstream_json("/v1/chat/completions", request, auth)
                    message = data["choices"][0]["message"]
                    self._json(200, {"model": body["model"], "message": message, "done": True})
                elif self.path == "/v1/rerank":
                    self._json(200, {"results": self._rerank(body, auth)})
                else:
                    target = self.path
                    body_bytes = raw if raw else None
                    if self.path.startswith("/v1/") and isinstance(body, dict) and "model" in body:
                        body["model"] = _bare(str(body["model"]))
                        body_bytes = json.dumps(body).encode()
                    headers = {"Content-Type": "application/json"}
                    if auth:
                        headers["Authorization"] = auth
                    status, payload, _ = shim.upstream(method, target, body_bytes, headers)
                    self._send(status, payload)
            except UpstreamError as error:
                self._send(error.status, error.raw)

        def _rerank(self, body: dict[str, Any], auth: str | None) -> list[dict[str, Any]]:
            texts = [body["query"], *body["documents"]]
            data = shim.upstream_json(
                "/v1/embeddings", {"model": EMBED_ALIAS, "input": texts}, auth
            )
            vectors = [d["embedding"] for d in sorted(data["data"], key=lambda d: d["index"])]

            def unit(v: list[float]) -> list[float]:
                n = math.sqrt(sum(x * x for x in v))
                return [x / n for x in v]

            query = unit(vectors[0])
            results = []
            for index, vector in enumerate(vectors[1:]):
                cosine = sum(a * b for a, b in zip(query, unit(vector), strict=True))
                results.append({"index": index, "relevance_score": (cosine + 1) / 2})
            return sorted(results, key=lambda r: -r["relevance_score"])

    return Handler


def start_shim(upstream: ModelServer) -> Shim:
    shim = Shim(upstream.port)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(shim))
    server.daemon_threads = True
    shim.server = server
    shim.port = int(server.server_address[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return shim


@pytest.fixture(scope="session")
def model_server() -> Iterator[ModelServer]:
    """A real llama_cpp.server with MiniLM (`minilm`) and gemma-3-270m (`gemma`)."""
    prepared_model("all-MiniLM-L6-v2-f16.gguf")
    prepared_model("gemma-3-270m-q4_k_m.gguf")
    server = start_server(threads=2)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def shim(model_server: ModelServer) -> Iterator[Shim]:
    proxy = start_shim(model_server)
    try:
        yield proxy
    finally:
        proxy.stop()
