"""A raw client of the legacy HTTP+SSE transport (MCP 2024-11-05: `GET /sse`, then `POST
/messages`), for tests that must see the wire: the `endpoint` event, each POST's status, and
every event the stream carries, in order."""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from tests.http_harness import Reply, send


class StreamClosedError(Exception):
    pass


class SseSession:
    """One open `GET /sse` stream and the session it names."""

    def __init__(
        self, port: int, headers: Mapping[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        self.port = port
        self.headers = dict(headers or {})
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        lines = [f"{k}: {v}" for k, v in self.headers.items()]
        head = "GET /sse HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n"
        self.sock.sendall((head + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode())
        self._buffer = b""
        self._raw = b""
        status_line, _headers = self._read_head()
        self.status = int(status_line.split()[1])
        self.events: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self.endpoint = ""
        self.next_id = 0
        self.closed = False
        self.aside: list[dict[str, Any]] = []
        if self.status != 200:
            return
        kind, data = self._read_event()
        assert kind == "endpoint", (kind, data)
        self.endpoint = data
        threading.Thread(target=self._read_events, daemon=True).start()

    # -- the stream -----------------------------------------------------------------------

    def _read_head(self) -> tuple[str, str]:
        raw = b""
        while b"\r\n\r\n" not in raw:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise StreamClosedError(raw.decode("latin-1"))
            raw += chunk
        head, self._raw = raw.split(b"\r\n\r\n", 1)
        status_line, _, rest = head.decode("latin-1").partition("\r\n")
        self._chunked = "transfer-encoding: chunked" in rest.lower()
        self._ended = False
        self._fill()
        return status_line, rest

    def _fill(self) -> None:
        """Move what has arrived from `_raw` to `_buffer`, undoing the chunked coding."""
        if not self._chunked:
            self._buffer, self._raw = self._buffer + self._raw, b""
            return
        while True:
            size_end = self._raw.find(b"\r\n")
            if size_end < 0:
                return
            size = int(self._raw[:size_end].split(b";")[0], 16)
            if size == 0:
                self._ended = True
                return
            if len(self._raw) < size_end + 2 + size + 2:
                return
            self._buffer += self._raw[size_end + 2 : size_end + 2 + size]
            self._raw = self._raw[size_end + 2 + size + 2 :]

    def _more(self) -> None:
        if self._ended:
            raise StreamClosedError
        chunk = self.sock.recv(65536)
        if not chunk:
            raise StreamClosedError
        self._raw += chunk
        self._fill()

    def _read_event(self) -> tuple[str, str]:
        while True:
            while b"\n\n" not in self._buffer:
                self._more()
            block, self._buffer = self._buffer.split(b"\n\n", 1)
            kind, data = "message", []
            for line in block.decode("utf-8").split("\n"):
                if line.startswith("event: "):
                    kind = line[len("event: ") :]
                elif line.startswith("data: "):
                    data.append(line[len("data: ") :])
            if data:  # a comment-only block is a keep-alive
                return kind, "\n".join(data)

    def _read_events(self) -> None:
        try:
            while True:
                self.events.put(self._read_event())
        except (StreamClosedError, OSError):
            self.closed = True
            self.events.put(None)

    def receive(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next `message` event's JSON."""
        item = self.events.get(timeout=timeout)
        if item is None:
            self.events.put(None)
            raise StreamClosedError("the stream ended")
        kind, data = item
        assert kind == "message", item
        message: dict[str, Any] = json.loads(data)
        return message

    def ended(self, timeout: float) -> bool:
        """Whether the server ends the stream within `timeout` (messages before it skipped)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                if self.events.get(timeout=left) is None:
                    return True
            except queue.Empty:
                return False
        return False

    def silent_for(self, seconds: float) -> bool:
        try:
            item = self.events.get(timeout=seconds)
        except queue.Empty:
            return True
        self.events.put(item)
        return False

    # -- the POSTs ------------------------------------------------------------------------

    def post(
        self,
        message: Any,
        headers: Mapping[str, str] | None = None,
        path: str | None = None,
    ) -> Reply:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        base = {"Content-Type": "application/json", **self.headers}
        try:
            return send(
                connection, "POST", path or self.endpoint, message, {**base, **(headers or {})}
            )
        finally:
            connection.close()

    def send(self, message: dict[str, Any]) -> None:
        reply = self.post(message)
        assert reply.status == 202, (reply.status, reply.text)

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Send a request and return its reply; anything else the stream carries meanwhile
        (notifications, our own requests) goes to `aside`."""
        self.next_id += 1
        request_id = self.next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        deadline = time.monotonic() + timeout
        while True:
            reply = self.receive(max(0.1, deadline - time.monotonic()))
            if reply.get("id") == request_id and "method" not in reply:
                return reply
            self.aside.append(reply)

    def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.request(
            "initialize",
            {
                "protocolVersion": "2024-11-05",
                "capabilities": capabilities or {},
                "clientInfo": {"name": "sse-harness", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def call(self, tool: str, arguments: dict[str, Any], timeout: float = 60.0) -> Any:
        return self.request("tools/call", {"name": tool, "arguments": arguments}, timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def open_when_free(port: int, within: float = 10.0) -> SseSession:
    """A stream, once the server has a slot for it: streams the client just closed are
    counted until the server has seen them go, which takes a moment on a loaded machine."""
    deadline = time.monotonic() + within
    while True:
        session = SseSession(port)
        if session.status != 503 or time.monotonic() > deadline:
            assert session.status == 200, session.status
            return session
        session.close()
        time.sleep(0.05)
