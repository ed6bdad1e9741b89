"""The HTTP+SSE transport of MCP 2024-11-05 (`GET /sse` + `POST /messages`), which seeds 002
and 004 name and older clients still speak (REQ-MCP-SSE-*).

A client opens `GET /sse`, an event stream that stays open: its first event, `endpoint`,
names the URI to POST messages to (`/messages?session_id=<unguessable id>`). Each POST
carries one JSON-RPC message (or a batch) and is answered 202 at once; every reply,
notification and server-to-client request (sampling) goes out as a `message` event on the
stream. One stream is one MCP session: stateful like stdio (the `initialize` handshake, the
client's capabilities, `resources/subscribe`), run by the same `Dispatcher` as stdio over the
HTTP server's worker pools, so the lanes, time limits, cancellation and write commits are
the ones of every other transport. Closing the stream ends the session: its requests in
flight are cancelled, its waits on the client end, its subscriptions go.

Everything in front of routing holds here too (adapters/http/app.py): the Origin/Host screen
and the bearer token on both routes, the body limit and body timeout on each POST, the
connection cap. A POST is accepted only for a session that is open and with the
`Authorization` its stream was opened with. Open streams are capped below the connection
cap, so streams alone never lock every other request out; SIGTERM lets their requests in
flight finish within the grace period, then ends them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from adapters.config.service import DEFAULT_SAMPLING_TIMEOUT_S
from adapters.http.exchange import (
    SERVER_ERROR,
    SSE_HEADERS,
    HttpReply,
    method_not_allowed,
    sse_event,
    transport_error,
)
from adapters.http.limits import DEFAULT_MAX_QUEUED_BYTES
from adapters.mcp.dispatch import Dispatcher
from adapters.mcp.outgoing import Correlator
from adapters.mcp.protocol import (
    CONNECTION_METHODS,
    INVALID_REQUEST,
    MAX_DEPTH,
    PARSE_ERROR,
    FrameError,
    Session,
    Surface,
    decode_frame,
    depth_exceeds,
)
from adapters.mcp.subscriptions import SubscriptionHub
from adapters.mcp.workers import WorkerPools

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SSE_PATH = "/sse"
MESSAGES_PATH = "/messages"
LEGACY_PATHS = frozenset({SSE_PATH, MESSAGES_PATH})
SESSION_PARAM = "session_id"
KEEPALIVE_S = 15.0  # a comment line this often: proxies keep the stream, a dead peer shows
DRAIN_POLL_S = 0.05
SESSION_ID_BYTES = 32  # 256 random bits
# A session's requests in flight plus messages its stream has not taken yet: beyond this a
# POST is refused busy, so a client that posts without reading its stream cannot make the
# server hold an unbounded backlog (on /mcp each request holds a connection of its own).
MAX_PENDING = 256

log = logging.getLogger("qmd.http")


class _Wake:
    """Nudges a stream's loop (the server is shutting down, or its client went away)."""


_WAKE = _Wake()


class _Unsent:
    """Messages emitted (from any thread) and not yet written to the stream: how many, and
    their bytes, which the session's byte budget bounds (REQ-HTTP-LIMIT-007)."""

    def __init__(self, budget: int) -> None:
        self._lock = threading.Lock()
        self.budget = budget
        self.count = 0
        self.bytes = 0
        self.closed = False  # the session has ended: nothing is taken any more

    def take(self, size: int, always: bool = False) -> bool:
        """Count a message of `size` bytes in, if it fits the budget (or `always`)."""
        with self._lock:
            if self.closed or (not always and self.bytes + size > self.budget):
                return False
            self.count += 1
            self.bytes += size
            return True

    def written(self, size: int) -> None:
        with self._lock:
            self.count -= 1
            self.bytes -= size


@dataclass
class _LegacySession:
    session: Session
    dispatcher: Dispatcher
    outbox: asyncio.Queue[bytes | _Wake]  # events, encoded where they were emitted
    authorization: str
    unsent: _Unsent
    gone: bool = False


class LegacySseTransport:
    """The open legacy sessions of one HTTP server. `front` builds the one surface the
    sessions admit their messages with and subscribe on (created on first use; the requests
    themselves run on the pools' workers, each over its own connection to the index)."""

    def __init__(
        self,
        pools: WorkerPools,
        front: Callable[[], Surface],
        timeout_s: float | None,
        max_sessions: int = 256,
        sampling_timeout_s: float = DEFAULT_SAMPLING_TIMEOUT_S,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
    ) -> None:
        self._pools = pools
        self.max_queued_bytes = max_queued_bytes
        self._sampling_timeout_s = sampling_timeout_s
        self._front_factory = front
        self._front: Surface | None = None
        self._hub: SubscriptionHub | None = None
        self._timeout_s = timeout_s
        self.max_sessions = max_sessions
        self._sessions: dict[str, _LegacySession] = {}
        self._closing_at: float | None = None  # monotonic deadline once SIGTERM came
        self._closing = False

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

    def _surface(self) -> tuple[Surface, SubscriptionHub | None]:
        if self._front is None:
            self._front = self._front_factory()
            watchable = self._front.facts.subscribable
            self._hub = SubscriptionHub(self._front) if watchable else None
        return self._front, self._hub

    # -- GET /sse ---------------------------------------------------------------------------

    async def stream(
        self, method: str, headers: dict[str, str], receive: Receive, send: Send
    ) -> HttpReply | None:
        """Serve one session's stream until its client leaves (None: answered as a stream
        already) or refuse it with an HTTP reply."""
        if method != "GET":
            return method_not_allowed()
        if self._closing:
            return transport_error(503, SERVER_ERROR, "Server busy: shutting down")
        if len(self._sessions) >= self.max_sessions:
            return transport_error(503, SERVER_ERROR, "Server busy: too many open SSE sessions")
        surface, hub = self._surface()
        loop = asyncio.get_running_loop()
        outbox: asyncio.Queue[bytes | _Wake] = asyncio.Queue()
        unsent = _Unsent(self.max_queued_bytes)

        def emit(message: dict[str, Any]) -> None:  # from any thread
            # encoded here, on the worker: the session holds bytes, counted against its
            # budget before a reply's request stops counting as in flight
            event = sse_event(message)
            if not unsent.take(len(event)):
                if unsent.closed:  # a reply finished after its session ended: nobody to tell
                    return
                refusal = _over_budget(message, unsent)
                if refusal is None:
                    return
                event = sse_event(refusal)
                unsent.take(len(event), always=True)  # small, and MAX_PENDING still holds
            loop.call_soon_threadsafe(outbox.put_nowait, event)

        session = Session(surface, emit=emit, outgoing=Correlator("qmd-sse"), subscriptions=hub)
        dispatcher = Dispatcher(
            session,
            emit,
            self._pools,
            self._timeout_s,
            self._sampling_timeout_s,
            inline=CONNECTION_METHODS,
        )
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        authorization = headers.get("authorization", "")
        entry = _LegacySession(session, dispatcher, outbox, authorization, unsent)
        self._sessions[session_id] = entry
        watcher = asyncio.ensure_future(_disconnected(receive))
        watcher.add_done_callback(lambda _done: _leave(entry))
        try:
            start = [(b"content-type", b"text/event-stream")]
            start += [(k.encode(), v.encode()) for k, v in SSE_HEADERS]
            await send({"type": "http.response.start", "status": 200, "headers": start})
            endpoint = f"{MESSAGES_PATH}?{SESSION_PARAM}={session_id}"
            await _chunk(send, f"event: endpoint\ndata: {endpoint}\n\n".encode())
            await self._pump(entry, send)
            if not entry.gone:
                with contextlib.suppress(OSError):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            log.info("an SSE stream could not be written: its client is gone")
        finally:
            watcher.cancel()
            self._end(session_id, entry)
        return None

    async def _pump(self, entry: _LegacySession, send: Send) -> None:
        """Forward the session's messages to its stream until the client leaves, or until
        the server shuts down and the session's requests in flight have ended."""
        while not entry.gone:
            if self._closing and entry.outbox.empty() and self._drained(entry):
                return
            wait = DRAIN_POLL_S if self._closing else KEEPALIVE_S
            try:
                message = await asyncio.wait_for(entry.outbox.get(), wait)
            except TimeoutError:
                if not self._closing:
                    await _chunk(send, b": keepalive\n\n")
                continue
            if isinstance(message, _Wake):
                continue
            await _chunk(send, message)
            entry.unsent.written(len(message))

    def _drained(self, entry: _LegacySession) -> bool:
        past = self._closing_at is not None and time.monotonic() >= self._closing_at
        return past or entry.dispatcher.wait_idle(0)

    def _end(self, session_id: str, entry: _LegacySession) -> None:
        """The stream ended: the session ends with it (REQ-MCP-SSE-004)."""
        self._sessions.pop(session_id, None)
        entry.gone = True
        # what the stream never took is freed now: the session's objects refer to each
        # other, and a quiet server may not collect such cycles for a long time
        entry.unsent.closed = True
        while not entry.outbox.empty():
            entry.outbox.get_nowait()
        entry.dispatcher.cancel_all()
        if entry.session.outgoing is not None:
            entry.session.outgoing.close("the client closed the SSE stream")
        if self._hub is not None:
            self._hub.drop(entry.session)
        entry.dispatcher.close()

    # -- POST /messages ---------------------------------------------------------------------

    def session_for(self, query: str, headers: dict[str, str]) -> _LegacySession | None:
        values = parse_qs(query).get(SESSION_PARAM, [])
        entry = self._sessions.get(values[0]) if len(values) == 1 else None
        if entry is None or entry.gone:
            return None
        # only whoever opened the stream posts to it (the same bearer token, if any)
        presented = headers.get("authorization", "").encode()
        return entry if hmac.compare_digest(presented, entry.authorization.encode()) else None

    def post(self, entry: _LegacySession, headers: dict[str, str], body: bytes) -> HttpReply:
        """One POST's messages, admitted in arrival order; their replies go to the stream."""
        if "application/json" not in headers.get("content-type", "").lower():
            return transport_error(
                415, SERVER_ERROR, "Unsupported Media Type: Content-Type must be application/json"
            )
        try:  # the wire's one decoding policy (REQ-WIRE-PARSE-001, REQ-WIRE-DEPTH-001)
            parsed = decode_frame(body)
        except FrameError as failure:
            parse = failure.code == PARSE_ERROR
            text = "Parse error: Invalid JSON" if parse else failure.message
            return transport_error(400, failure.code, text)
        if depth_exceeds(parsed):
            return transport_error(
                400, INVALID_REQUEST, f"Invalid Request: nested deeper than {MAX_DEPTH} levels"
            )
        messages = parsed if isinstance(parsed, list) and parsed else [parsed]
        backlog = entry.dispatcher.in_flight + entry.unsent.count
        if backlog + len(messages) > MAX_PENDING:
            return transport_error(
                503,
                SERVER_ERROR,
                f"Server busy: this session has {backlog} requests and replies pending "
                f"(at most {MAX_PENDING}); read the stream",
            )
        for message in messages:
            entry.dispatcher.feed(entry.session.admit(message))
        return HttpReply(202, b"Accepted", "text/plain; charset=utf-8")

    def begin_shutdown(self, grace_s: float) -> None:
        """SIGTERM: no new streams; each open one ends once its requests in flight have
        (at most `grace_s` from now)."""
        self._closing = True
        self._closing_at = time.monotonic() + grace_s
        for entry in list(self._sessions.values()):
            entry.outbox.put_nowait(_WAKE)


def _over_budget(message: dict[str, Any], unsent: _Unsent) -> dict[str, Any] | None:
    """What goes to the stream instead of a message its byte budget has no room for: a
    reply becomes an error naming the budget, so its caller is not left waiting; anything
    else (a notification, a request of ours) is dropped."""
    if "method" in message or "id" not in message:
        log.info("dropped an SSE message: its session's stream is %d bytes behind", unsent.bytes)
        return None
    log.info("an SSE reply did not fit its session's byte budget; answered with an error")
    text = (
        f"Reply dropped: this session's stream has {unsent.bytes} bytes its client has not "
        f"read (at most {unsent.budget}); read the stream"
    )
    error = {"code": SERVER_ERROR, "message": text}
    return {"jsonrpc": "2.0", "id": message["id"], "error": error}


def session_not_found() -> HttpReply:
    return transport_error(404, SERVER_ERROR, "Not Found: no open SSE session has this session_id")


def _leave(entry: _LegacySession) -> None:
    entry.gone = True
    entry.outbox.put_nowait(_WAKE)


async def _chunk(send: Send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _disconnected(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
