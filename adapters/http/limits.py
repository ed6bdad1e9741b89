"""The HTTP server's connection limits (REQ-HTTP-LIMIT-*): how long a client may take to send
a request head and a request body, how large a head may be, how long a keep-alive connection
may sit idle, how many connections may be open at once, how long a connection may take none of
the bytes written to it, how many reply bytes one client may leave unread, and how long
SIGTERM waits for requests in flight.

uvicorn times out idle keep-alive connections (`timeout_keep_alive`) and bounds a request
head's size only while it arrives in pieces (`h11_max_incomplete_event_size`), but never times
out a connection that sends nothing, a head sent a byte at a time, a body that never ends or a
client that stops reading (its unsent reply stays in memory, even after `transport.close()`,
which waits for it to be written), and it accepts connections until the process runs out of
file descriptors. `limited_protocol` adds those to its h11 protocol; everything else is
uvicorn's. (uvicorn's own `limit_concurrency` is not used: it answers 503 only once a request
head has arrived, and never frees a descriptor held by a connection that sends nothing.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import resource
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from adapters.http.memory import MemoryTrimmer

log = logging.getLogger("qmd.http")

HEADER_TIMEOUT_ENV = "QMD_HTTP_HEADER_TIMEOUT"
BODY_TIMEOUT_ENV = "QMD_HTTP_BODY_TIMEOUT"
IDLE_TIMEOUT_ENV = "QMD_HTTP_IDLE_TIMEOUT"
MAX_CONNECTIONS_ENV = "QMD_HTTP_MAX_CONNECTIONS"
SHUTDOWN_GRACE_ENV = "QMD_HTTP_SHUTDOWN_GRACE"
WRITE_TIMEOUT_ENV = "QMD_HTTP_WRITE_TIMEOUT"
MAX_QUEUED_BYTES_ENV = "QMD_HTTP_MAX_QUEUED_BYTES"
DEFAULT_MAX_QUEUED_BYTES = 16 * 1024 * 1024
MAX_HEAD_BYTES = 16 * 1024  # a request line and headers larger than this get 431
# The end of a request head: h11 accepts bare LF line endings as well as CRLF.
_HEAD_END = re.compile(rb"\n\r?\n")
# Descriptors kept free below the process's limit for what is not a client connection: the
# index's database files of every worker, model files, the log, pipes.
RESERVED_DESCRIPTORS = 128
REFUSAL_LOG_EVERY_S = 10.0
ACCEPT_BURST = 32  # connections asyncio accepts per wake-up, before the cap sees them
_REASONS = {
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


class LimitsError(ValueError):
    """A limit set to something that is not a positive number (a message for the user)."""


@dataclass(frozen=True)
class HttpLimits:
    header_timeout_s: float = 10.0  # from a connection's first byte (or its opening) to its head
    body_timeout_s: float = 30.0  # from a request's head to the end of its body
    idle_timeout_s: float = 5.0  # a keep-alive connection with no request
    max_connections: int = 512  # open at once (lowered to fit the descriptor limit)
    shutdown_grace_s: float = 10.0  # SIGTERM: how long requests in flight may still run
    # written bytes a client takes none of for this long: the connection is dropped
    write_timeout_s: float = 30.0
    # reply bytes held for one connection (one reply) or one legacy SSE session (its unread
    # replies): a reply past it is answered with an error instead (REQ-HTTP-LIMIT-007)
    max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HttpLimits:
        """The defaults, each overridden by its environment variable when set."""
        default = cls()
        return cls(
            header_timeout_s=_seconds(env, HEADER_TIMEOUT_ENV, default.header_timeout_s),
            body_timeout_s=_seconds(env, BODY_TIMEOUT_ENV, default.body_timeout_s),
            idle_timeout_s=_seconds(env, IDLE_TIMEOUT_ENV, default.idle_timeout_s),
            max_connections=int(_number(env, MAX_CONNECTIONS_ENV, default.max_connections, True)),
            shutdown_grace_s=_seconds(env, SHUTDOWN_GRACE_ENV, default.shutdown_grace_s),
            write_timeout_s=_seconds(env, WRITE_TIMEOUT_ENV, default.write_timeout_s),
            max_queued_bytes=int(
                _number(env, MAX_QUEUED_BYTES_ENV, default.max_queued_bytes, True)
            ),
        )

    def connection_cap(self) -> int:
        """`max_connections`, lowered so that a full server still has descriptors to spare:
        a connection beyond the cap is refused by the server, not by the kernel's `accept`."""
        try:
            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        except (OSError, ValueError):
            return self.max_connections
        if soft == resource.RLIM_INFINITY:
            return self.max_connections
        return max(1, min(self.max_connections, soft - RESERVED_DESCRIPTORS))


def _number(env: Mapping[str, str], name: str, default: float, whole: bool = False) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = -1
    if not value > 0 or value == float("inf"):
        kind = "a positive whole number" if whole else "a positive number of seconds"
        raise LimitsError(f"{name}={raw!r}: expected {kind}")
    return value


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    return _number(env, name, default)


class _DescriptorExhaustion(logging.Filter):
    """asyncio logs a traceback each time `accept` runs out of descriptors (then pauses
    accepting for a second): one short line says it, and points at the setting."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "out of system resource" in str(record.msg):
            record.msg = (
                "out of file descriptors: not accepting connections for a second "
                f"(lower {MAX_CONNECTIONS_ENV} or raise the process's descriptor limit)"
            )
            record.args = None
            record.exc_info = None
        return True


_EXHAUSTION_FILTER = _DescriptorExhaustion()


def quiet_descriptor_exhaustion() -> None:
    logging.getLogger("asyncio").addFilter(_EXHAUSTION_FILTER)


class _Refusals:
    """Connections refused over the cap, logged at most once per REFUSAL_LOG_EVERY_S: a flood
    of connections must not become a flood of log lines."""

    def __init__(self) -> None:
        self.count = 0
        self.logged_at = 0.0

    def add(self, cap: int) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.logged_at >= REFUSAL_LOG_EVERY_S:
            log.warning(
                "refused %d connection(s): %d open, every one busy with a request", self.count, cap
            )
            self.count, self.logged_at = 0, now


def _error_body(code: int, message: str) -> bytes:
    error = {"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": None}
    return json.dumps(error, separators=(",", ":")).encode()


def _raw_response(status: int, reason: str, body: bytes) -> bytes:
    """A complete response for a connection that h11 is not tracking (refused at once)."""
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def limited_protocol(limits: HttpLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `limits`' head and body timeouts and connection cap."""
    cap = limits.connection_cap()
    refusals = _Refusals()
    trimmer = MemoryTrimmer()

    class LimitedH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = None
            self._body_timer: asyncio.TimerHandle | None = None
            self._waiting_since = time.monotonic()  # when it last began waiting for a request
            self._head_bytes = False  # some of the next request's head has arrived
            self._write_timer: asyncio.TimerHandle | None = None
            self._unsent_at_check = 0  # bytes waiting to be written at the last look
            self._drained_some = False  # the transport's buffer fell below its low mark since

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            if len(self.connections) > cap and not self._evict_one_waiting():
                self.connections.discard(self)
                refusals.add(cap)
                body = _error_body(-32000, "Server busy: too many open connections")
                self.transport.write(_raw_response(503, "Service Unavailable", body))
                self.transport.close()
                return
            self._arm_head_timer()

        def _evict_one_waiting(self) -> bool:
            """Make room by closing the connection that has waited longest for its next
            request: connections that only sit open never lock active clients out."""
            waiting = [
                c
                for c in self.connections
                if c is not self and isinstance(c, LimitedH11Protocol) and c._waiting()
            ]
            if not waiting:
                return False
            oldest = min(waiting, key=lambda c: c._waiting_since)
            # a reply its client never read would otherwise stay queued after close()
            oldest._close_quietly(abort=True)
            self.connections.discard(oldest)
            return True

        def _waiting(self) -> bool:
            in_request = self.cycle is not None and not self.cycle.response_complete
            return not in_request and not self.transport.is_closing()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_timers()
            super().connection_lost(exc)
            trimmer.soon(self.loop)  # what its replies held goes back to the system

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE:
                self._head_bytes = True
                if self._head_timer is None:  # a keep-alive connection's next request began
                    self._arm_head_timer()
                if self._head_too_large(data):
                    self._answer_and_close(
                        431,
                        "Request Header Fields Too Large: the request head is larger than "
                        f"{MAX_HEAD_BYTES} bytes",
                    )
                    return
            super().data_received(data)

        def _head_too_large(self, data: bytes) -> bool:
            """Whether the head being received is past MAX_HEAD_BYTES. h11 checks its own
            limit only while a head is incomplete, so a large head that arrives whole in one
            read would pass it: the assembled head is measured here, however it came."""
            buffered = self.conn.trailing_data[0]
            if len(buffered) + len(data) <= MAX_HEAD_BYTES:
                return False
            joined = buffered + data
            end = _HEAD_END.search(joined)
            return (end.end() if end is not None else len(joined)) > MAX_HEAD_BYTES

        def handle_events(self) -> None:
            super().handle_events()
            self._follow_state()

        def on_response_complete(self) -> None:
            self._waiting_since = time.monotonic()
            self._head_bytes = False
            super().on_response_complete()
            self._follow_state()
            self._watch_writes()

        # -- the write side: a client that takes none of its reply is dropped ---------------

        def pause_writing(self) -> None:
            super().pause_writing()
            self._watch_writes()

        def resume_writing(self) -> None:
            self._drained_some = True
            super().resume_writing()

        def _watch_writes(self) -> None:
            """Look again after the write timeout while bytes wait to be written."""
            if self._write_timer is not None:
                return
            unsent = self.transport.get_write_buffer_size()
            if unsent:
                self._unsent_at_check, self._drained_some = unsent, False
                self._write_timer = self.loop.call_later(
                    limits.write_timeout_s, self._writes_checked
                )

        def _writes_checked(self) -> None:
            self._write_timer = None
            unsent = self.transport.get_write_buffer_size()
            if not unsent:
                return
            if unsent < self._unsent_at_check or self._drained_some:  # it is reading
                self._watch_writes()
                return
            log.info(
                "dropped a connection that took none of %d unsent bytes in %g s",
                unsent,
                limits.write_timeout_s,
            )
            self._close_quietly(abort=True)

        def _follow_state(self) -> None:
            """Which timer runs follows where the client is in its request."""
            state = self.conn.their_state
            if state is not h11.IDLE and self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            if state is h11.SEND_BODY:
                if self._body_timer is None:
                    self._body_timer = self.loop.call_later(
                        limits.body_timeout_s, self._body_timed_out
                    )
            elif self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _arm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(limits.header_timeout_s, self._head_timed_out)

        def _cancel_timers(self) -> None:
            for timer in (self._head_timer, self._body_timer, self._write_timer):
                if timer is not None:
                    timer.cancel()
            self._head_timer = self._body_timer = self._write_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            if self._head_bytes:  # a head begun and never finished
                self._answer_and_close(408, "Request Timeout: the request head took too long")
            else:
                self._close_quietly()

        def _body_timed_out(self) -> None:
            self._body_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
                return
            cycle = self.cycle
            if cycle is not None and not cycle.response_started:
                self._answer_and_close(408, "Request Timeout: the request body took too long")
            else:
                self._close_quietly()

        def _answer_and_close(self, status: int, message: str) -> None:
            """Answer a request the client is too slow to finish, then hang up; the
            application, if it already has the request, sees the client gone."""
            body = _error_body(-32000, message)
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            try:
                response = h11.Response(
                    status_code=status, headers=headers, reason=_REASONS[status]
                )
                self.transport.write(self.conn.send(response))
                self.transport.write(self.conn.send(h11.Data(data=body)))
                self.transport.write(self.conn.send(h11.EndOfMessage()))
            except h11.LocalProtocolError:
                pass  # h11 cannot frame an answer here: hanging up says enough
            self._close_quietly()

        def _close_quietly(self, abort: bool = False) -> None:
            """Hang up. `abort` drops what is still waiting to be written (close() would keep
            it, and the connection, until the client reads it); otherwise a closing
            connection that still has bytes to write is watched like any other."""
            self._cancel_timers()
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True  # the application's receive() sees the client gone
                cycle.message_event.set()
            if abort and self.transport.get_write_buffer_size():
                self.transport.abort()
                return
            self.transport.close()
            self._watch_writes()

        def timeout_keep_alive_handler(self) -> None:
            super().timeout_keep_alive_handler()
            self._watch_writes()  # an unread reply does not keep the connection forever

        def shutdown(self) -> None:
            """SIGTERM: a connection still sending its request is closed at once (the request
            was never complete, so nothing was accepted); requests being answered finish."""
            if self.conn.their_state is h11.SEND_BODY or (
                self.conn.their_state is h11.IDLE and self._head_bytes
            ):
                self._close_quietly()
                return
            self._cancel_timers()
            super().shutdown()

    return LimitedH11Protocol
