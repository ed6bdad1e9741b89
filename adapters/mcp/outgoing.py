"""Requests the server sends to the client (server-to-client requests of the 2025 era:
`sampling/createMessage`), correlated with the responses that come back.

The correlator is transport-neutral: a transport gives it a way to emit a message (a line on
stdout, an event on the SSE stream of the POST being answered) and hands it every JSON-RPC
response it reads (`deliver`). The stdio loop consults it for each incoming response while a
tool call runs on a worker thread; the HTTP app shares one across its workers, because the
2025-era client POSTs each response on a request of its own (docs/decisions/0039).

Ids are unguessable (REQ-SEC-OUT-001): only the client that reads the stream a request went
out on learns its id, so no other client can answer it. Each request also names its `owner`
(the requester over HTTP) and a response is accepted only from that owner; a request whose
call is cancelled (the client went away, a cancel, a time limit) stops waiting at once.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Emit = Callable[[dict[str, Any]], None]
# told while a request waits for its answer: (method, seconds waited so far)
Progress = Callable[[str, float], None]
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_PROGRESS_EVERY_S = 5.0


class ClientRequestError(Exception):
    """The client answered with an error, never answered, or the connection went away."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


# registers a callback for when the call is cancelled; returns a function that withdraws it
Watch = Callable[[Callable[[], None]], Callable[[], None]]
ID_BYTES = 18  # 144 random bits per request id


@dataclass
class _Pending:
    owner: Any = None
    done: threading.Event = field(default_factory=threading.Event)
    reply: dict[str, Any] | None = None
    failure: str | None = None


class Correlator:
    """Outgoing requests waiting for their responses, by id."""

    def __init__(self, prefix: str = "qmd") -> None:
        self._prefix = prefix
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self._closed: str | None = None

    def request(
        self,
        emit: Emit,
        method: str,
        params: dict[str, Any],
        timeout: float = DEFAULT_TIMEOUT_S,
        *,
        owner: Any = None,
        watch: Watch | None = None,
        progress: Progress | None = None,
        progress_every_s: float = DEFAULT_PROGRESS_EVERY_S,
    ) -> dict[str, Any]:
        """Send `method` through `emit`, block until its response, return its `result`.
        `owner`: the only one whose response is accepted (`deliver`); `watch`: how to hear
        that the call was cancelled, which ends the wait; `progress`: told every
        `progress_every_s` while the wait goes on (method, seconds waited)."""
        request_id = f"{self._prefix}-{secrets.token_urlsafe(ID_BYTES)}"
        pending = _Pending(owner)
        with self._lock:
            if self._closed is not None:
                raise ClientRequestError(self._closed)
            self._pending[request_id] = pending
        withdraw = watch(lambda: _fail(pending, "the call was cancelled")) if watch else None
        try:
            if pending.failure is None:
                emit({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            if not _wait(pending, method, timeout, progress, progress_every_s):
                raise ClientRequestError(f"the client did not answer {method} in {timeout:g} s")
        finally:
            if withdraw is not None:
                withdraw()
            with self._lock:
                self._pending.pop(request_id, None)
        if pending.failure is not None:
            raise ClientRequestError(pending.failure)
        reply = pending.reply or {}
        error = reply.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            raise ClientRequestError(
                str(error.get("message", "error")), code if isinstance(code, int) else None
            )
        result = reply.get("result")
        if not isinstance(result, dict):
            raise ClientRequestError(f"the client's answer to {method} has no result object")
        return result

    def deliver(self, message: dict[str, Any], owner: Any = None) -> bool:
        """Hand over a response read from `owner`; False when no request of that owner waits
        for it (an unknown id, or another requester's: dropped)."""
        request_id = message.get("id")
        if not isinstance(request_id, str):
            return False
        with self._lock:
            pending = self._pending.get(request_id)
            if pending is None or pending.owner != owner or pending.done.is_set():
                return False
            pending.reply = message
            pending.done.set()
        return True

    def close(self, reason: str = "the client closed the connection") -> None:
        """Fail every waiting request (the transport is going away)."""
        with self._lock:
            self._closed = reason
            waiting = list(self._pending.values())
        for pending in waiting:
            _fail(pending, reason)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._pending)


def _fail(pending: _Pending, reason: str) -> None:
    if not pending.done.is_set():
        pending.failure = reason
        pending.done.set()


def _wait(
    pending: _Pending, method: str, timeout: float, progress: Progress | None, every: float
) -> bool:
    """Wait up to `timeout` for the answer, telling `progress` every `every` seconds while
    none has come; False when the time ran out."""
    if progress is None:
        return pending.done.wait(timeout)
    began = time.monotonic()
    while True:
        left = timeout - (time.monotonic() - began)
        if left <= 0:
            return pending.done.is_set()
        if pending.done.wait(min(left, every)):
            return True
        if time.monotonic() - began < timeout:
            progress(method, time.monotonic() - began)
