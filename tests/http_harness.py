"""A real `qmd` HTTP server process for the end-to-end tests, and a small raw HTTP client."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LISTENING = "QMD MCP server listening on "
ACCEPT_BOTH = "application/json, text/event-stream"
MODERN = "2026-07-28"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[Any]:
        """The JSON of every `event: message` in an SSE body."""
        found = []
        for block in self.text.split("\n\n"):
            lines = block.split("\n")
            if lines[0] == "event: message" and lines[1].startswith("data: "):
                found.append(json.loads(lines[1][len("data: ") :]))
        return found


@dataclass
class HttpServer:
    """`qmd <args>` started with `--port 0`; the port is read from its start line."""

    args: Sequence[str]
    env: Mapping[str, str]
    cwd: Path = REPO
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log: list[str] = field(default_factory=list)

    def start(
        self, timeout: float = 60.0, preexec_fn: Callable[[], None] | None = None
    ) -> HttpServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", *self.args],
            env=dict(self.env),
            cwd=str(self.cwd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=preexec_fn,
        )
        ready = threading.Event()

        def read() -> None:
            assert self.process is not None and self.process.stderr is not None
            for raw in iter(self.process.stderr.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.log.append(line)
                if line.startswith(LISTENING):
                    self.port = int(line.rsplit(":", 1)[1].split("/")[0])
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(timeout) or not self.port:
            self.stop()
            raise RuntimeError("server did not start:\n" + "\n".join(self.log))
        return self

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}/mcp"

    def request(
        self,
        method: str,
        path: str,
        body: bytes | str | Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Reply:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            return send(connection, method, path, body, headers)
        finally:
            connection.close()

    def mcp(self, message: Any, headers: Mapping[str, str] | None = None) -> Reply:
        base = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}
        return self.request("POST", "/mcp", message, {**base, **(headers or {})})

    def modern(self, method: str, params: dict[str, Any], name: str | None = None) -> Reply:
        envelope = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        if name is not None:
            headers["Mcp-Name"] = name
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {**params, "_meta": envelope},
        }
        return self.mcp(message, headers)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            os.kill(self.process.pid, sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)


def send(
    connection: http.client.HTTPConnection,
    method: str,
    path: str,
    body: bytes | str | Any = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    data: bytes | None
    if body is None or isinstance(body, bytes):
        data = body
    elif isinstance(body, str):
        data = body.encode("utf-8")
    else:
        data = json.dumps(body).encode("utf-8")
    connection.request(method, path, body=data, headers=dict(headers or {}))
    response = connection.getresponse()
    payload = response.read()
    return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, payload)
