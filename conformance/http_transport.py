"""HTTP transport: one Streamable HTTP server for a whole run, raw HTTP exchanges per step.

A step names the HTTP method, path, headers and body exactly (nothing is added but
`Content-Length` and, unless the step sets one, `Host`), so the suite can check what a server
does with wrong headers, bad JSON, foreign origins. What comes back is described as data the
usual matchers and goldens compare: status, content type, and the body as JSON, as the JSON of
each Server-Sent Event, or as text; plus the envelope key order of each JSON-RPC message and
the SSE framing with the JSON left out, since the original's bytes are part of the contract.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from conformance.transport import ServerStartError


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class HttpTarget:
    """Where the server listens (`http://host:port`)."""

    base_url: str
    timeout: float = 15.0

    @property
    def host_port(self) -> tuple[str, int]:
        parts = urllib.parse.urlsplit(self.base_url)
        return parts.hostname or "127.0.0.1", parts.port or 80

    def exchange(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes | None
    ) -> tuple[int, dict[str, str], bytes]:
        host, port = self.host_port
        connection = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            names = {name.lower() for name in headers}
            connection.putrequest(
                method, path, skip_host="host" in names, skip_accept_encoding=True
            )
            for name, value in headers.items():
                connection.putheader(name, value)
            if body is not None:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            payload = response.read()
            found = {k.lower(): v for k, v in response.getheaders()}
            return response.status, found, payload
        finally:
            connection.close()

    def healthy(self) -> bool:
        try:
            status, _headers, _body = self.exchange("GET", "/health", {}, None)
        except OSError:
            return False
        return status == 200


@dataclass
class HttpServerProcess:
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    log_path: Path
    _proc: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    def start(self, target: HttpTarget, wait_s: float = 60.0) -> None:
        self._log = self.log_path.open("wb")
        try:
            self._proc = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                env=dict(self.env),
                cwd=str(self.cwd),
                start_new_session=True,
            )
        except OSError as exc:
            raise ServerStartError(f"cannot execute {list(self.argv)!r}: {exc}") from exc
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ServerStartError(f"exited with {self._proc.returncode}:\n{self.log_tail()}")
            if target.healthy():
                return
            time.sleep(0.1)
        raise ServerStartError(f"GET /health did not answer 200 in {wait_s:g}s:\n{self.log_tail()}")

    def log_tail(self, limit: int = 2000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", errors="replace")

    def close(self, grace: float = 10.0) -> int | None:
        proc = self._proc
        rc: int | None = None
        if proc is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    break
                try:
                    rc = proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self._log is not None:
            self._log.close()
        return rc


def request_body(step: Mapping[str, Any]) -> bytes | None:
    if "json" in step:
        return json.dumps(step["json"], ensure_ascii=False, separators=(",", ":")).encode()
    if "body" in step:
        return str(step["body"]).encode("utf-8")
    return None


def _keys(message: Any) -> list[str] | None:
    return list(message) if isinstance(message, dict) else None


def describe(status: int, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """What a response is, as comparable data."""
    content_type = headers.get("content-type")
    out: dict[str, Any] = {"status": status, "contentType": content_type}
    text = body.decode("utf-8", errors="replace")
    if content_type and content_type.startswith("text/event-stream"):
        events: list[Any] = []
        framing: list[str] = []
        for block in text.split("\n\n"):
            if not block:
                continue
            lines = block.split("\n")
            shape = []
            for line in lines:
                if line.startswith("data: "):
                    try:
                        events.append(json.loads(line[len("data: ") :]))
                        shape.append("data: <json>")
                    except ValueError:
                        events.append({"$nonJson": line})
                        shape.append(line)
                else:
                    shape.append(line)
            framing.append("\n".join(shape))
        out["body"] = {"sse": events, "keys": [_keys(e) for e in events], "framing": framing}
        return out
    if not body:
        out["body"] = None
        return out
    try:
        parsed = json.loads(text)
    except ValueError:
        out["body"] = {"text": text}
        return out
    out["body"] = {"json": parsed, "keys": _keys(parsed)}
    return out


def probe_modern(target: HttpTarget) -> str | None:
    """None when the server answers a 2026-07-28 `server/discover`; else what it sent instead."""
    era = "2026-07-28"
    message = {
        "jsonrpc": "2.0",
        "id": "era-probe",
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": era,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": era,
        "Mcp-Method": "server/discover",
    }
    try:
        status, found, body = target.exchange(
            "POST", "/mcp", headers, request_body({"json": message})
        )
    except OSError as exc:
        return f"POST /mcp failed: {exc!r}"
    replies = [m for _path, m in messages_of(describe(status, found, body))]
    if status == 200 and any(isinstance(m, dict) and "result" in m for m in replies):
        return None
    return f"HTTP {status}: {body[:200].decode('utf-8', errors='replace')!r}"


def messages_of(described: dict[str, Any]) -> list[tuple[list[str | int], Any]]:
    """(path into `described`, message) of every JSON-RPC message in a described response."""
    body = described.get("body")
    if not isinstance(body, dict):
        return []
    if "sse" in body:
        return [(["body", "sse", i], event) for i, event in enumerate(body["sse"])]
    if "json" in body and isinstance(body["json"], dict) and "jsonrpc" in body["json"]:
        return [(["body", "json"], body["json"])]
    return []
