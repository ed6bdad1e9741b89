"""The ASGI application: a thin layer of HTTP over the MCP `Session`, the REST route and
`/health`, run by uvicorn (docs/decisions/0025).

Every request, whatever its path, first passes the Origin/Host screen (403 -32003, as the
original) and, when a bearer token is configured, the token check (401). Then:
`GET /health`, `POST /query` and `POST /search` (REST), `/mcp` (Streamable HTTP in both
eras, `adapters/http/exchange.py`), `GET /sse` + `POST /messages` (the 2024-11-05 HTTP+SSE
transport, `adapters/http/legacy_sse.py`), and 404 `Not Found` for anything else. The work
runs in worker threads (`adapters/mcp/workers.py`) under a per-request time limit; a client
that goes away cancels its request. Which lane a tool call takes, its time limit and whether
its answer is streamed come from the facts its surface declares (`SurfaceFacts`), never from
a name.

**The screen** (`OriginPolicy`, `token_matches`): the DNS-rebinding screen on `Origin` and
`Host`, with the original's rules (`src/mcp/origin-guard.ts` in QMD 2.8.3), plus the optional
bearer token. A browser page on another site can make a local client's browser POST to a
loopback port; the `Origin` header gives it away, and a rebound DNS name shows up in `Host`.
Loopback origins and hosts pass, anything else must be on an allow-list (flag or environment).

The headers are read strictly (REQ-HTTP-PARSE-001..003): an `Origin` must be exactly
`scheme://host[:port]` (no user info, path, query, fragment, nor a second value), a `Host`
exactly `host[:port]` with nothing after an IPv6 literal's `]`; anything else is not
loopback, whatever it contains. A request without `Host` is refused while Host checks are
on, since the screen cannot vouch for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from adapters.config.service import DEFAULT_SAMPLING_TIMEOUT_S
from adapters.http.exchange import (
    SERVER_ERROR,
    SSE_HEADERS,
    HttpReply,
    McpPlan,
    answer,
    frame_replies,
    method_not_allowed,
    plan_mcp_request,
    sse_event,
    transport_error,
)
from adapters.http.ldims_api import PREFIX as LDIMS_PREFIX
from adapters.http.ldims_api import answer as backend_answer
from adapters.http.ldims_api import backend_timeout, runs_search
from adapters.http.legacy_sse import (
    LEGACY_PATHS,
    SSE_PATH,
    LegacySseTransport,
    session_not_found,
)
from adapters.http.limits import DEFAULT_MAX_QUEUED_BYTES, MAX_QUEUED_BYTES_ENV
from adapters.http.options import DEFAULT_MAX_BODY_BYTES, DEFAULT_TIMEOUT_S, TOKEN_ENV
from adapters.http.rest import internal_error, parse_body, rest_query
from adapters.mcp.outgoing import Correlator
from adapters.mcp.protocol import cancel_notice
from adapters.mcp.tools import NO_FACTS, Budgets, SurfaceFacts, hybrid_query_runs_model
from adapters.mcp.workers import BusyError, CancelledJobError, Job, Worker, WorkerPools
from domain.profiles import SearchProfile

# -- the screen: who may talk to the server -----------------------------------------------

WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})
ORIGINS_ENV = "QMD_ALLOWED_ORIGINS"
HOSTS_ENV = "QMD_ALLOWED_HOSTS"
# RFC 3986 reg-name and IPv4address, as far as a client names a server: letters, digits and
# `-._~` (no user info, percent-encoding or sub-delimiters); an optional decimal port.
_NAME = re.compile(r"[a-z0-9._~-]+")
_PORT = re.compile(r"[0-9]{1,5}")
_SCHEME_AUTHORITY = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<authority>[^/?#]*)", re.I)
MISSING_HOST = "(none)"


def parse_host(value: str) -> tuple[str, int | None] | None:
    """`host[:port]` of a Host header or an origin's authority: (lower-case host without
    brackets, port), or None when it is not exactly that."""
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[1:end], text[end + 1 :]
        if "%" in host:  # a zone id: no browser sends one, and it names no remote host
            return None
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    else:
        host, colon, port_text = text.partition(":")
        rest = colon + port_text
        if not _NAME.fullmatch(host):
            return None
    if not rest:
        return host, None
    if not rest.startswith(":") or not _PORT.fullmatch(rest[1:]) or int(rest[1:]) > 65535:
        return None
    return host, int(rest[1:])


def request_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header fields by lower-case name; a field sent on several lines is one value joined
    by ", " (RFC 9110 section 5.3), so a repeated `Origin` reads as the list it is."""
    headers: dict[str, str] = {}
    for key, value in raw:
        name, text = key.decode("latin-1").lower(), value.decode("latin-1")
        headers[name] = f"{headers[name]}, {text}" if name in headers else text
    return headers


def is_loopback_hostname(name: str) -> bool:
    """localhost, *.localhost, 127.0.0.0/8, ::1 and ::ffff:127.x.x.x; never 0.0.0.0."""
    host = name.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _split_list(raw: str | None) -> list[str]:
    return [part.strip() for part in (raw or "").split(",") if part.strip()]


def normalize_origin(origin: str) -> str | None:
    """`URL.origin` as a browser writes it: scheme://host[:port], lower case, default port
    dropped; None when `origin` is not an http(s) URL."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default = 80 if scheme == "http" else 443
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def parse_origin(origin: str) -> str | None:
    """A request's `Origin`, read strictly (RFC 6454 serialisation): its normalised form
    (as `normalize_origin`), or None unless it is exactly http(s)://host[:port]."""
    match = _SCHEME_AUTHORITY.fullmatch(origin.strip())
    if match is None:
        return None
    scheme = match["scheme"].lower()
    parsed = parse_host(match["authority"])
    if scheme not in ("http", "https") or parsed is None:
        return None
    host, port = parsed
    if ":" in host:
        host = f"[{host}]"
    default = 80 if scheme == "http" else 443
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


@dataclass(frozen=True)
class OriginPolicy:
    allowed_origins: frozenset[str]
    allowed_hosts: frozenset[str]
    enforce_host: bool
    disabled: bool  # `*` among the allowed origins turns both checks off, as in the original

    @classmethod
    def build(
        cls,
        bind_host: str,
        env: Mapping[str, str],
        extra_origins: Iterable[str] = (),
        extra_hosts: Iterable[str] = (),
    ) -> OriginPolicy:
        origins = [*_split_list(env.get(ORIGINS_ENV)), *extra_origins]
        hosts = [h.lower() for h in [*_split_list(env.get(HOSTS_ENV)), *extra_hosts]]
        wildcard = bind_host.strip() in WILDCARD_BINDS
        if not wildcard and not is_loopback_hostname(bind_host):
            hosts.append(bind_host.strip().lower())
        normalized = {normalize_origin(o) or o.lower() for o in origins}
        return cls(
            allowed_origins=frozenset(normalized),
            allowed_hosts=frozenset(hosts),
            enforce_host=not wildcard or bool(hosts),
            disabled="*" in origins,
        )

    def refusal(self, origin: str | None, host: str | None) -> str | None:
        """Why a request is refused (`Origin not allowed: …`), or None when it may pass.
        `host` None: the request had no Host header (HTTP/1.0)."""
        if self.disabled:
            return None
        if origin is not None and not self._origin_ok(origin):
            return f"Origin not allowed: {origin}"
        if self.enforce_host and not self._host_ok(host):
            return f"Host not allowed: {MISSING_HOST if host is None else host}"
        return None

    def _origin_ok(self, origin: str) -> bool:
        normalized = parse_origin(origin)
        if normalized is None:
            return False
        hostname = urlsplit(normalized).hostname or ""
        return is_loopback_hostname(hostname) or normalized in self.allowed_origins

    def _host_ok(self, host: str | None) -> bool:
        parsed = parse_host(host) if host is not None else None
        if parsed is None:
            return False
        name, port = parsed
        if is_loopback_hostname(name):
            return True
        # an allow-list entry names a host, or a host and port (IPv6 in brackets)
        shown = f"[{name}]" if ":" in name else name
        with_port = shown if port is None else f"{shown}:{port}"
        return bool({name, shown, with_port} & self.allowed_hosts)


def bind_refusal(bind_host: str, policy: OriginPolicy, token: str | None) -> str | None:
    """A server reachable from the network must say who may use it: an allow-list or a
    bearer token. Returns the reason to refuse the bind, or None."""
    if is_loopback_hostname(bind_host):
        return None
    if token or policy.disabled:
        return None
    explicit = policy.allowed_origins or (policy.allowed_hosts - {bind_host.strip().lower()})
    if explicit:
        return None
    return (
        f"Refusing to listen on {bind_host!r}: it is reachable from the network, and no "
        f"allow-list ({ORIGINS_ENV} / {HOSTS_ENV}, --allow-origin / --allow-host) or bearer "
        f"token ({TOKEN_ENV}, --token) is set. Bind to localhost, or set one of them."
    )


def token_matches(authorization: str | None, token: str) -> bool:
    if not authorization:
        return False
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())


# -- the application ------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

FORBIDDEN = -32003
UNAUTHORIZED = -32001
TIMED_OUT = -32001
BUSY = -32000
NOT_FOUND = HttpReply(404, b"Not Found")
STREAMED = HttpReply(200)  # the answer went out as a live event stream already

log = logging.getLogger("qmd.http")


@dataclass(frozen=True)
class HttpSettings:
    policy: OriginPolicy
    profile: SearchProfile  # how REST /query searches (the served surface's profile)
    strict_original: bool  # REST answers a failing search with the original's bare 500
    token: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # a call that waits on the client (sampling) has this limit instead (REQ-MEM-SAMPLING-001)
    sampling_timeout_s: float = DEFAULT_SAMPLING_TIMEOUT_S
    # the most reply bytes held for one connection (REQ-HTTP-LIMIT-007)
    max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES

    @property
    def budgets(self) -> Budgets:
        return Budgets(self.timeout_s, self.sampling_timeout_s)


class BodyTooLargeError(Exception):
    pass


class ClientGoneError(Exception):
    """The client left (or was timed out, REQ-HTTP-LIMIT-003) before its body was whole."""


@dataclass(frozen=True)
class _Request:
    """One HTTP request as the routes see it."""

    method: str
    path: str
    headers: dict[str, str]
    receive: Receive
    client: str = ""
    send: Send | None = None
    backend_target: tuple[str, str] | None = None
    query: str = ""


Route = Callable[[_Request], Awaitable[tuple[HttpReply | None, str]]]


class QmdHttpApp:
    def __init__(
        self,
        pools: WorkerPools,
        settings: HttpSettings,
        outgoing: Correlator | None = None,
        facts: SurfaceFacts = NO_FACTS,
        legacy: LegacySseTransport | None = None,
    ) -> None:
        self.pools = pools
        self.settings = settings
        self.started = time.monotonic()
        # server-to-client requests of the 2025 era (sampling): None when the surface sends none
        self.outgoing = outgoing
        self.facts = facts  # what the served surface declares of its tools
        self.legacy = legacy  # the 2024-11-05 HTTP+SSE transport (adapters/http/legacy_sse.py)
        self._routes = self._route_table()

    def begin_shutdown(self, grace_s: float) -> None:
        """SIGTERM: open event streams end once their requests in flight have."""
        if self.legacy is not None:
            self.legacy.begin_shutdown(grace_s)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        began = time.perf_counter()
        method = str(scope["method"])
        path = str(scope["path"])
        headers = request_headers(scope.get("headers", []))
        label = ""
        try:
            peer = scope.get("client")
            client = str(peer[0]) if peer else ""
            # seed 003's LDIMS backend API (REQ-LDIMS-DEPLOY-001); the original has none
            if path.startswith(LDIMS_PREFIX) and not self.settings.strict_original:
                raw = scope.get("raw_path") or path.encode("utf-8")
                target = (raw.decode("latin-1"), scope.get("query_string", b"").decode("latin-1"))
            else:
                target = None
            query = scope.get("query_string", b"").decode("latin-1")
            reply, label = await self._route(
                method, path, headers, receive, client, send, target, query
            )
        except ClientGoneError:  # the body never came whole: there is no request to answer
            reply = None
        except BodyTooLargeError:
            reply = transport_error(
                413,
                -32600,
                f"Request body too large (limit {self.settings.max_body_bytes} bytes)",
            )
        except Exception:  # one bad request never takes the server down
            log.exception("HTTP handler error")
            reply = internal_error()
        if reply is None:  # the client went away; nobody to answer
            _log_request(method, path, label, 499, began)
            return
        if reply is STREAMED:
            _log_request(method, path, label, 200, began)
            return
        if len(reply.body) > self.settings.max_queued_bytes:
            reply = transport_error(500, SERVER_ERROR, self._too_large_text(len(reply.body)))
        await _send(send, reply, head_only=method == "HEAD")
        _log_request(method, path, label, reply.status, began)

    async def _route(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        receive: Receive,
        client: str = "",
        send: Send | None = None,
        backend_target: tuple[str, str] | None = None,
        query: str = "",
    ) -> tuple[HttpReply | None, str]:
        request = _Request(method, path, headers, receive, client, send, backend_target, query)
        for guard in (self._origin_guard, self._token_guard):
            refused = guard(request)
            if refused is not None:
                return refused
        if backend_target is not None:  # seed 003's backend API: a path prefix, not one path
            return await self._backend(method, *backend_target, receive), ""
        handler = self._routes.get(path)
        if handler is None:
            return NOT_FOUND, ""
        return await handler(request)

    def _route_table(self) -> dict[str, Route]:
        """Path -> handler; every route sits behind the guards of `_route`."""
        routes: dict[str, Route] = {
            "/health": self._health,
            "/query": self._rest_route,
            "/search": self._rest_route,
            "/mcp": self._mcp_route,
        }
        if self.legacy is not None:
            routes.update(dict.fromkeys(LEGACY_PATHS, self._legacy_route))
        return routes

    def _origin_guard(self, request: _Request) -> tuple[HttpReply, str] | None:
        headers = request.headers
        refusal = self.settings.policy.refusal(headers.get("origin"), headers.get("host"))
        if refusal is None:
            return None
        return transport_error(403, FORBIDDEN, f"Forbidden: {refusal}"), refusal

    def _token_guard(self, request: _Request) -> tuple[HttpReply, str] | None:
        token = self.settings.token
        if not token or request.path == "/health":
            return None
        if token_matches(request.headers.get("authorization"), token):
            return None
        reply = transport_error(401, UNAUTHORIZED, "Unauthorized: a valid bearer token is required")
        challenge = (("www-authenticate", "Bearer"),)
        return HttpReply(reply.status, reply.body, reply.content_type, challenge), "unauthorized"

    async def _health(self, request: _Request) -> tuple[HttpReply | None, str]:
        if request.method != "GET":
            return NOT_FOUND, ""
        uptime = math.floor(time.monotonic() - self.started)
        body = b'{"status":"ok","uptime":' + str(uptime).encode() + b"}"
        return HttpReply(200, body, "application/json"), ""

    async def _rest_route(self, request: _Request) -> tuple[HttpReply | None, str]:
        if request.method != "POST":
            return NOT_FOUND, ""
        return await self._rest(await self._body(request.headers, request.receive), request.receive)

    async def _legacy_route(self, request: _Request) -> tuple[HttpReply | None, str]:
        if self.legacy is None or request.send is None:
            return NOT_FOUND, ""
        return await self._legacy(
            self.legacy,
            request.method,
            request.path,
            request.headers,
            request.receive,
            request.send,
            request.query,
        )

    async def _mcp_route(self, request: _Request) -> tuple[HttpReply | None, str]:
        method, headers, receive, send = (
            request.method,
            request.headers,
            request.receive,
            request.send,
        )
        body = await self._body(headers, receive) if method == "POST" else b""
        plan = plan_mcp_request(method, headers, body)
        if plan.reply is not None:
            return plan.reply, plan.label or method
        # who sent this POST: only they may answer the requests its stream carries
        requester = (request.client, headers.get("authorization", ""))
        if self.outgoing is not None and not plan.modern:
            if all("method" not in m for m in plan.messages):
                for message in plan.messages:  # the client's answers to our requests
                    if not self.outgoing.deliver(message, requester):
                        log.info("dropped an answer no request of this client awaits")
                return HttpReply(202), "response"
            if send is not None and self._waits_on_client(plan):
                return await self._mcp_streamed(plan, send, receive, requester), plan.label
        answered = await self._mcp(plan, receive)
        if answered is not None and len(answered.body) > self.settings.max_queued_bytes:
            text = self._too_large_text(len(answered.body))
            return _errors_for(plan, SERVER_ERROR, text, 200), plan.label
        return answered, plan.label

    def _too_large_text(self, size: int) -> str:
        return (
            f"Reply too large: {size} bytes, more than one connection may hold "
            f"({self.settings.max_queued_bytes} bytes, {MAX_QUEUED_BYTES_ENV}); ask for less"
        )

    async def _legacy(
        self,
        legacy: LegacySseTransport,
        method: str,
        path: str,
        headers: dict[str, str],
        receive: Receive,
        send: Send,
        query: str,
    ) -> tuple[HttpReply | None, str]:
        if path == SSE_PATH:
            reply = await legacy.stream(method, headers, receive, send)
            return (STREAMED if reply is None else reply), "stream"
        if method != "POST":
            return method_not_allowed(), ""
        entry = legacy.session_for(query, headers)
        if entry is None:
            return session_not_found(), "no session"
        return legacy.post(entry, headers, await self._body(headers, receive)), "message"

    def _waits_on_client(self, plan: McpPlan) -> bool:
        return any(self.facts.tool(name).waits_on_client for name, _args in plan.tool_calls())

    def _time_limit(self, plan: McpPlan) -> float:
        """The plan's time limit: the longest of its tool calls' (`Budgets`, adapters/mcp/tools.py),
        the request time limit for anything else. In the 2026-07-28 era nothing waits on the
        client (it answers `input_required` instead), so a tool that would is held to the
        request time limit."""
        budgets = self.settings.budgets
        limits = [
            budgets.time_limit(self.facts.tool(name), modern=plan.modern)
            for name, _ in plan.tool_calls()
        ]
        return max(
            (limit for limit in limits if limit is not None), default=self.settings.timeout_s
        )

    async def _body(self, headers: dict[str, str], receive: Receive) -> bytes:
        limit = self.settings.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise BodyTooLargeError
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGoneError  # a part of a body is not a request
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyTooLargeError
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _rest(self, raw: bytes, receive: Receive) -> tuple[HttpReply | None, str]:
        settings = self.settings
        try:
            body = parse_body(raw)
        except (ValueError, UnicodeDecodeError):
            if settings.strict_original:
                return internal_error(), "bad JSON"
            return HttpReply(400, b'{"error":"Invalid JSON body"}', "application/json"), "bad JSON"
        searches = body.get("searches") if isinstance(body, dict) else None
        label = f"{len(searches)} queries" if isinstance(searches, list) else ""
        model = isinstance(body, dict) and hybrid_query_runs_model(
            {k: body.get(k) for k in ("searches", "rerank")}
        )

        def work(worker: Worker) -> HttpReply:
            return rest_query(worker.services, settings.profile, body, settings.strict_original)

        try:
            reply = await self._guarded(work, model, receive, self.settings.timeout_s)
        except BusyError:
            return _rest_error(503, "Server busy: too many model requests queued"), label
        except TimeoutError:
            return _rest_error(504, self._timeout_text()), label
        return reply, label

    async def _backend(self, method: str, raw_path: str, query: str, receive: Receive) -> HttpReply:
        def work(worker: Worker) -> HttpReply:
            return backend_answer(worker.services, method, raw_path, query)

        try:  # a search may embed and rerank: the model lane's bounds apply
            reply = await self._guarded(
                work, runs_search(raw_path), receive, self.settings.timeout_s
            )
        except (BusyError, TimeoutError):
            return backend_timeout(self.settings.timeout_s)
        return reply if reply is not None else NOT_FOUND

    async def _mcp(self, plan: McpPlan, receive: Receive) -> HttpReply | None:
        model = any(self.facts.tool(name).may_run_model(args) for name, args in plan.tool_calls())
        for message in plan.messages:
            notice = (
                None
                if "id" in message
                else cancel_notice(str(message.get("method")), message.get("params"))
            )
            if notice is not None:  # REQ-SEC-OUT-003
                log.info(
                    "ignored a cancel of request %r: over HTTP only its own requester can "
                    "cancel a request, by closing its connection",
                    notice.request_id,
                )

        def work(worker: Worker) -> HttpReply:
            return answer(worker.session, plan)

        limit = self._time_limit(plan)
        try:
            return await self._guarded(work, model, receive, limit)
        except BusyError:
            return _errors_for(plan, BUSY, "Server busy: too many model requests queued", 503)
        except TimeoutError:
            return _errors_for(plan, TIMED_OUT, self._timeout_text(limit), 200)

    async def _mcp_streamed(
        self, plan: McpPlan, send: Send, receive: Receive, requester: Any
    ) -> HttpReply | None:
        """A 2025-era POST calling a tool that waits on the client: the SSE stream opens at
        once and carries, before the replies, every request the tool sends the client while
        it runs (the client POSTs its answers separately; `self.outgoing` takes them from
        `requester` only), and the progress notifications of the wait. The time limit is the
        sampling one (REQ-MEM-SAMPLING-001): past it the call is cancelled and answered with
        the timeout error in the stream. A client that goes away cancels the call: its waits
        end and its lane slot is freed (REQ-MCP-HTTP-007)."""
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        limit = self._time_limit(plan)
        job = self._job(limit)

        def emit(message: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(events.put_nowait, message)

        def work(worker: Worker) -> list[dict[str, Any]]:
            session = worker.session
            session.emit, session.owner = emit, requester
            try:
                handled = (session.handle_message(m) for m in plan.messages)
                return [r for r in handled if r is not None]
            finally:
                session.emit, session.owner = None, None

        model = any(self.facts.tool(name).may_run_model(args) for name, args in plan.tool_calls())
        # its lane slot is lent while it waits on the client (REQ-MCP-LANE-001)
        lends = self._waits_on_client(plan)
        task = asyncio.ensure_future(self.pools.run(job, work, model, lends=lends))
        task.add_done_callback(lambda _task: events.put_nowait(None))
        watcher = asyncio.ensure_future(_disconnected(receive))
        watcher.add_done_callback(lambda done: None if done.cancelled() else _abandon(job))
        headers = [(b"content-type", b"text/event-stream")]
        headers += [(k.encode(), v.encode()) for k, v in SSE_HEADERS]
        gone = False
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
        except OSError:
            gone = True
        deadline: float | None = loop.time() + limit
        next_event = asyncio.ensure_future(events.get())
        timed_out = False
        while True:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            await asyncio.wait({next_event}, timeout=left)
            if not next_event.done():  # past the time limit: cancel, answer the timeout
                timed_out = job.cancel()
                if timed_out:
                    next_event.cancel()
                    break
                log.info("a timeout was refused: the request has committed a write")
                deadline = None  # it is answered when it ends
                continue
            message = next_event.result()
            if message is None:
                break
            next_event = asyncio.ensure_future(events.get())
            gone = gone or watcher.done()
            if not gone:
                try:
                    chunk = sse_event(message)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except OSError:  # the client went away: nobody will answer the tool
                    gone = True
            if gone:
                _abandon(job)
        gone = gone or (watcher.done() and not watcher.cancelled())
        watcher.cancel()
        if timed_out:
            task.add_done_callback(_drop_result)
            replies = _error_replies(plan, TIMED_OUT, self._timeout_text(limit))
        else:
            replies = _streamed_replies(task, plan)
        if gone:
            return None  # the client went away: nobody to answer
        body = b"".join(sse_event(reply) for reply in replies)
        if len(body) > self.settings.max_queued_bytes:
            text = self._too_large_text(len(body))
            body = b"".join(sse_event(r) for r in _error_replies(plan, SERVER_ERROR, text))
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": body, "more_body": False})
        return STREAMED

    def _job(self, limit: float | None) -> Job:
        """A request's job, told its time limit (its waits on the client end there, and
        report progress meanwhile)."""
        return Job(
            deadline=None if limit is None else time.monotonic() + limit,
            progress_every_s=self.settings.budgets.progress_every_s,
        )

    def _timeout_text(self, limit: float | None = None) -> str:
        return f"Request timed out after {limit or self.settings.timeout_s:g} s"

    async def _guarded(
        self,
        work: Callable[[Worker], HttpReply],
        model: bool,
        receive: Receive,
        limit: float | None,
    ) -> HttpReply | None:
        """Run `work` on a worker; TimeoutError past `limit` (None: no limit). A model-lane
        request is also watched for its client going away (None then). Either way the job is
        cancelled: skipped if it has not started, its running SQL statement interrupted, its
        waits on the client ended; unless it has committed a write, which is then awaited
        and answered (the cancel is refused: it was written). Fast requests are not watched
        for disconnects: they finish in milliseconds, and a watcher task per request costs
        more than it could save."""
        job = self._job(limit)
        task = asyncio.ensure_future(self.pools.run(job, work, model))
        waiting: set[asyncio.Future[Any]] = {task}
        watcher = asyncio.ensure_future(_disconnected(receive)) if model else None
        if watcher is not None:
            waiting.add(watcher)
        done, _ = await asyncio.wait(waiting, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        if watcher is not None:
            watcher.cancel()
        if task in done:
            return task.result()
        if not job.cancel():
            log.info("a cancel was refused: the request has committed a write")
            return await task
        task.add_done_callback(_drop_result)
        if watcher is not None and watcher in done:
            return None
        raise TimeoutError


def _drop_result(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        error = task.exception()
        if error is not None and not isinstance(error, CancelledJobError):
            log.info("abandoned request ended with %s", type(error).__name__)


def _streamed_replies(task: asyncio.Future[list[dict[str, Any]]], plan: McpPlan) -> list[Any]:
    """The replies of a streamed call that has ended; its errors answered in the stream."""
    try:
        return task.result()
    except BusyError:
        return _error_replies(plan, BUSY, "Server busy: too many model requests queued")
    except CancelledJobError:
        return []
    except Exception:  # the stream is open: answer in it, never with a second status
        log.exception("streamed MCP request failed")
        return _error_replies(plan, -32603, "Internal error")


def _abandon(job: Job) -> None:
    if not job.cancel():
        log.info("the client went away after the request committed a write")


async def _disconnected(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


def _rest_error(status: int, text: str) -> HttpReply:
    return HttpReply(status, json.dumps({"error": text}).encode(), "application/json")


def _error_replies(plan: McpPlan, code: int, message: str) -> list[dict[str, Any]]:
    return [
        {"jsonrpc": "2.0", "id": m["id"], "error": {"code": code, "message": message}}
        for m in plan.messages
        if "id" in m and "method" in m
    ]


def _errors_for(plan: McpPlan, code: int, message: str, status: int) -> HttpReply:
    """One JSON-RPC error per request in the plan, framed as its replies would have been."""
    replies = _error_replies(plan, code, message)
    if status != 200:
        first = replies[0]["id"] if replies else None
        return transport_error(status, SERVER_ERROR if code == BUSY else code, message, first)
    return frame_replies(plan, replies)


async def _send(send: Send, reply: HttpReply, head_only: bool = False) -> None:
    headers = [(b"content-length", str(len(reply.body)).encode())]
    if reply.content_type is not None:
        headers.append((b"content-type", reply.content_type.encode()))
    headers += [(k.encode(), v.encode()) for k, v in reply.headers]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head_only else reply.body})


def _log_request(method: str, path: str, label: str, status: int, began: float) -> None:
    elapsed = (time.perf_counter() - began) * 1000
    stamp = datetime.now().strftime("%H:%M:%S.%f")[:-3]
    detail = f" {label}" if label else ""
    log.info("%s %s %s%s %d (%dms)", stamp, method, path, detail, status, round(elapsed))
