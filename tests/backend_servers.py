"""A loopback HTTP peer that misbehaves as a test scripts it, for the outbound clients (the
LDIMS backend's, adapters/ldims_api/client.py; the remote models', adapters/models/http_json.py).

`ScriptedPeer` listens on a real socket; for each request it reads the head and asks
`script(path)` what to do: `Canned` (a whole HTTP answer), `Drip` (an answer sent one byte
every `every_s` seconds, as a slow or hostile backend does) or `Raw` (bytes that need not be
HTTP at all). `dripping` counts the connections a `Drip` is still feeding: it falls when the
client shuts its end, so a test sees whether the client let go.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Canned:
    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)

    def wire(self) -> bytes:
        lines = [f"HTTP/1.1 {self.status} Scripted"]
        lines += [f"{name}: {value}" for name, value in self.headers]
        lines += [f"Content-Length: {len(self.body)}", "Connection: close", "", ""]
        return "\r\n".join(lines).encode("latin-1") + self.body


def json_answer(status: int, value: Any) -> Canned:
    return Canned(status, json.dumps(value).encode())


def redirect(status: int, location: str) -> Canned:
    return Canned(status, b"", (("Location", location),))


@dataclass(frozen=True)
class Drip:
    """`answer` sent one byte every `every_s` seconds (forever, in effect, for a long one)."""

    answer: bytes
    every_s: float = 2.0


@dataclass(frozen=True)
class Raw:
    data: bytes


Behaviour = Canned | Drip | Raw


@dataclass
class ScriptedPeer:
    script: Callable[[str], Behaviour]
    requests: list[str] = field(default_factory=list)
    dripping: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _sock: socket.socket | None = None

    @property
    def port(self) -> int:
        assert self._sock is not None
        port: int = self._sock.getsockname()[1]
        return port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptedPeer:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.1)
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            self._sock.close()

    def wait_dripping(self, count: int, timeout: float) -> bool:
        """Wait until exactly `count` connections are being dripped to."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if self.dripping == count:
                    return True
            time.sleep(0.02)
        return False

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                connection, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            head = b""
            connection.settimeout(10)
            try:
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = connection.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                head, _, body = head.partition(b"\r\n\r\n")
                # the body too: what is left unread would look like the client speaking
                length = _content_length(head)
                while len(body) < length:
                    chunk = connection.recv(65536)
                    if not chunk:
                        return
                    body += chunk
            except OSError:
                return
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            path = request_line.split(" ")[1] if " " in request_line else ""
            with self._lock:
                self.requests.append(path)
            behaviour = self.script(path)
            try:
                if isinstance(behaviour, Drip):
                    self._drip(connection, behaviour)
                elif isinstance(behaviour, Raw):
                    connection.sendall(behaviour.data)
                else:
                    connection.sendall(behaviour.wire())
            except OSError:  # the client let go
                return

    def _drip(self, connection: socket.socket, drip: Drip) -> None:
        with self._lock:
            self.dripping += 1
        try:
            for byte in drip.answer:
                if self._stop.is_set():
                    return
                connection.sendall(bytes([byte]))
                # the client's shutdown shows as the peer's FIN (a read of b"") or a reset
                connection.settimeout(drip.every_s)
                try:
                    if connection.recv(1, socket.MSG_PEEK) == b"":
                        return
                except TimeoutError:
                    pass
        finally:
            with self._lock:
                self.dripping -= 1


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip() or 0)
    return 0


@contextmanager
def scripted_peer(script: Callable[[str], Behaviour]) -> Iterator[ScriptedPeer]:
    peer = ScriptedPeer(script).start()
    try:
        yield peer
    finally:
        peer.stop()


def drip_forever(body: bytes = b"", every_s: float = 2.0) -> Drip:
    """A 200 whose head and body come one byte every `every_s` seconds: about an hour."""
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {1800 + len(body)}\r\n\r\n".encode()
    return Drip(head + body + b" " * 1800, every_s)
