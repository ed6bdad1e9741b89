"""JSON-RPC 2.0 session for MCP: message checks, protocol eras and method dispatch.

A connection speaks one era, decided by its opening messages as the original's stdio entry
decides it (`eras.ConnectionEra`): the 2026-07-28 era is stateless (validated envelope,
decorated results, no `initialize`/`ping`), the 2025 era has the `initialize` handshake.
What the tools do is the business of a `Surface`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from adapters.mcp.eras import MODERN_ERA, ConnectionEra, pinned_envelope_problem
from adapters.mcp.outgoing import (
    DEFAULT_PROGRESS_EVERY_S,
    DEFAULT_TIMEOUT_S,
    ClientRequestError,
    Correlator,
    Emit,
)
from adapters.mcp.progress import WaitProgress, progress_token
from adapters.mcp.subscriptions import SubscriptionHub
from adapters.mcp.surface import outside_templates, unknown_tool
from adapters.mcp.tools import Ask, CallContext, SurfaceFacts
from adapters.mcp.validation import js_type
from adapters.mcp.wire import (
    MAX_DEPTH,
    FrameError,
    decode_frame,
    depth_exceeds,
    find_unrepresentable,
    replace_lone_surrogates,
)
from adapters.mcp.wire import valid_id as _valid_id
from adapters.mcp.wording import JsonRpcError, ProtocolWording

LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_LEGACY = "2025-11-25"
MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_VERSION = -32022

# Cache hints the 2026-07-28 era attaches to results, per method.
_CACHE_HINTS: dict[str, int] = {
    "server/discover": 60000,
    "tools/list": 60000,
    "prompts/list": 60000,
    "resources/list": 0,
    "resources/templates/list": 0,
    "resources/read": 0,
}
# Methods of the 2025 handshake era that a 2026-07-28 request cannot call.
_LEGACY_ONLY = frozenset({"initialize", "ping", "resources/subscribe", "resources/unsubscribe"})
# ... and the one a 2025-era request cannot call.
_MODERN_ONLY = frozenset({"server/discover"})
# Methods a surface serves only when it declares the resources capability.
_RESOURCE_METHODS = frozenset({"resources/list", "resources/templates/list", "resources/read"})

log = logging.getLogger("qmd.mcp")


class Surface(Protocol):
    """The MCP-visible behaviour of one server profile (seed-000 spec or compat 2.8.3)."""

    name: str
    server_version: str
    answers_malformed_messages: bool
    wording: ProtocolWording
    facts: SurfaceFacts  # what transports must know of its tools (adapters/mcp/tools.py)

    def capabilities(self) -> dict[str, Any]: ...
    def instructions(self) -> str | None: ...
    def tools(self) -> list[dict[str, Any]]: ...
    def call_tool(self, name: str, arguments: Any, context: CallContext) -> dict[str, Any]: ...
    def prompts(self) -> list[dict[str, Any]] | None: ...
    def get_prompt(self, name: str, arguments: Any) -> dict[str, Any]: ...
    def resource_templates(self) -> list[dict[str, Any]]: ...
    def read_resource(self, uri: str) -> dict[str, Any]: ...
    # served only where `facts.subscribable` says the surface keeps watchers
    def subscribe(self, uri: str, notify: Callable[[str, dict[str, Any]], None]) -> None: ...
    def unsubscribe(self, uri: str) -> None: ...


# what a wait on the client leaves of the call's time limit for the tool to answer
CLIENT_WAIT_RESERVE_S = 1.0
CLIENT_WAIT_RESERVE_SHARE = 0.1


class Cancellable(Protocol):
    """The request a worker runs, as a tool sees it (adapters/mcp/workers.py, Job)."""

    deadline: float | None
    progress_every_s: float | None

    def commit(self) -> bool: ...
    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]: ...
    def waiting_on_client(self) -> AbstractContextManager[None]:
        """Around a wait on the client (the model-lane slot is lent meanwhile)."""
        ...


@dataclass
class _Request:
    id: Any
    method: str
    params: Any


@dataclass(frozen=True)
class Admitted:
    """A request that passed the session's checks, bound for its handler."""

    id: Any
    method: str
    params: Any
    modern: bool  # answered in the 2026-07-28 era's decorated form
    # what the client declared at initialize (2025 era); None where it cannot be known
    client_capabilities: dict[str, Any] | None = None
    # the connection has a stream of its own for messages the client did not ask for (stdio,
    # a legacy SSE session), so `resources/subscribe` can be served on it (REQ-MCP-SSE-006)
    session_stream: bool = False


@dataclass(frozen=True)
class CancelNotice:
    """`notifications/cancelled` naming a request: the transport stops that request's work."""

    request_id: Any
    reason: str | None = None


# What `Session.admit` hands back: a reply (or None: nothing to write), a request to run, or
# a request to cancel.
Admission = dict[str, Any] | Admitted | CancelNotice | None

CANCELLED = "notifications/cancelled"
SHUTDOWN = "shutdown"
# Methods that bind the connection itself (its stream): a transport that runs requests on
# other sessions' workers runs these on the connection's own session.
CONNECTION_METHODS = frozenset({"resources/subscribe", "resources/unsubscribe"})


def served_capabilities(declared: dict[str, Any], subscriptions: bool) -> dict[str, Any]:
    """What a surface declares, less what this connection cannot serve: `resources.subscribe`
    needs a stream to notify on (REQ-MCP-SSE-006). Derived per connection, never per surface."""
    resources = declared.get("resources")
    if subscriptions or not isinstance(resources, dict) or "subscribe" not in resources:
        return declared
    trimmed = {k: v for k, v in resources.items() if k != "subscribe"}
    return {**declared, "resources": trimmed}


def cancel_notice(method: str, params: Any) -> CancelNotice | None:
    """The notice a `notifications/cancelled` carries, if it names a request id."""
    if method != CANCELLED or not isinstance(params, dict):
        return None
    request_id = params.get("requestId")
    if not _valid_id(request_id):
        return None
    reason = params.get("reason")
    return CancelNotice(request_id, reason if isinstance(reason, str) else None)


class Session:
    """One MCP connection: feed it decoded messages, get back the replies to write."""

    def __init__(
        self,
        surface: Surface,
        *,
        stateless: bool = False,
        emit: Emit | None = None,
        outgoing: Correlator | None = None,
        subscriptions: SubscriptionHub | None = None,
    ) -> None:
        """`stateless`: every message is a connection of its own (Streamable HTTP, where each
        POST stands alone), so no message decides the era of the next. From the transport:
        `emit`, where server-to-client messages go; `outgoing`, the correlator that matches
        the client's responses to the requests we sent (adapters/mcp/outgoing.py);
        `subscriptions`, the hub a transport whose sessions share one surface subscribes
        through. A dispatcher serving several connections on one session rebinds `emit` and
        `outgoing` for the request it runs."""
        self.surface = surface
        self._stateless = stateless
        self._era = ConnectionEra()
        self._client_capabilities: dict[str, Any] | None = None
        self.emit = emit
        self.outgoing = outgoing
        # who may answer the requests we send (the HTTP requester; None on stdio, where the
        # connection is the only one), and the request being run, set by the worker pools
        self.owner: Any = None
        self.job: Cancellable | None = None
        self.subscriptions = subscriptions
        # the request this session is running (a session runs one request at a time)
        self._running: Admitted | None = None

    # -- envelope --------------------------------------------------------------------------

    @staticmethod
    def result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
        return {"result": result, "jsonrpc": "2.0", "id": request_id}

    @staticmethod
    def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
        body: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            body["data"] = data
        return {"jsonrpc": "2.0", "id": request_id, "error": body}

    def malformed(self, code: int, message: str, request_id: Any = None) -> dict[str, Any] | None:
        """Reply to an unusable message, or stay silent where the surface does (the original)."""
        if not self.surface.answers_malformed_messages:
            return None
        return self.error(request_id, code, message)

    # -- entry points ---------------------------------------------------------------------

    def handle_text(self, text: bytes | str) -> dict[str, Any] | None:
        """One frame, decoded by the wire policy (adapters/mcp/wire.py, REQ-WIRE-*)."""
        return self.finish(self.admit_text(text))

    def handle_message(self, message: Any) -> dict[str, Any] | None:
        return self.finish(self.admit(message))

    def finish(self, admitted: Admission) -> dict[str, Any] | None:
        """Run what `admit` let through here and now; a reply passes unchanged."""
        if isinstance(admitted, Admitted):
            return self.run(admitted)
        if isinstance(admitted, CancelNotice):
            return None
        return admitted

    # -- two steps: admit (in arrival order), run (anywhere) ---------------------------------
    #
    # A transport that runs requests concurrently (adapters/mcp/dispatch.py, the HTTP
    # service) calls `admit` for each message in arrival order: the checks, the connection's
    # era and the choice of handler happen there. `run` then executes an admitted request,
    # on this session or on another one over the same surface (a worker thread's).

    def admit_text(self, text: bytes | str) -> Admission:
        if not text.strip():
            return None
        try:
            message = decode_frame(text)
        except FrameError as failure:
            return self.malformed(failure.code, failure.message)
        if depth_exceeds(message):
            request_id = message.get("id") if isinstance(message, dict) else None
            return self.malformed(
                INVALID_REQUEST,
                f"Invalid Request: nested deeper than {MAX_DEPTH} levels",
                request_id if _valid_id(request_id) else None,
            )
        return self.admit(message)

    def admit(self, message: Any) -> Admission:
        """A reply to write now (or None), a request to `run`, or a cancellation notice."""
        if self._stateless:
            self._era = ConnectionEra()
        if not isinstance(message, dict):
            return self.malformed(INVALID_REQUEST, "Invalid Request")
        request_id = message.get("id")
        has_id = "id" in message
        if message.get("jsonrpc") != "2.0":
            return self.malformed(
                INVALID_REQUEST, "Invalid Request", request_id if _valid_id(request_id) else None
            )
        method = message.get("method")
        if not isinstance(method, str):
            if has_id and ("result" in message or "error" in message):
                if self.outgoing is not None:  # a response to one of our requests
                    self.outgoing.deliver(message)
                return None
            return self.malformed(
                INVALID_REQUEST, "Invalid Request", request_id if _valid_id(request_id) else None
            )
        if not has_id:
            # notifications need no reply (unknown ones are ignored), but may decide the era
            self._era.judge(method, message.get("params"), is_request=False)
            return cancel_notice(method, message.get("params"))
        if not _valid_id(request_id):
            return self.malformed(INVALID_REQUEST, "Invalid Request")
        params = message.get("params")
        if self.surface.answers_malformed_messages:
            problem = find_unrepresentable(params, "params")
            if problem is not None:  # REQ-WIRE-PARAMS-001
                return self.error(request_id, INVALID_PARAMS, f"Invalid params: {problem}")
        else:  # read leniently, as the original does (REQ-WIRE-COMPAT-001)
            params = replace_lone_surrogates(params)
        try:
            return self._route(_Request(request_id, method, params))
        except JsonRpcError as failure:
            return self.error(request_id, failure.code, failure.message, failure.data)
        except Exception:  # one bad request must not take the server down (seed 001)
            log.exception("internal error while admitting %s", method)
            return self.error(request_id, INTERNAL_ERROR, "Internal error")

    def run(self, request: Admitted) -> dict[str, Any]:
        """The reply to an admitted request, computed over this session's surface."""
        self._running = request
        try:
            result = self._handlers()[request.method](request.params)
            if request.modern:
                result = self._decorate_modern(request.method, result)
            return self.result(request.id, result)
        except JsonRpcError as failure:
            return self.error(request.id, failure.code, failure.message, failure.data)
        except Exception:  # one bad request must not take the server down (seed 001)
            log.exception("internal error while handling %s", request.method)
            return self.error(request.id, INTERNAL_ERROR, "Internal error")

    # -- dispatch -------------------------------------------------------------------------

    def _handlers(self) -> dict[str, Callable[[Any], dict[str, Any]]]:
        return {
            "initialize": self._initialize,
            "ping": self._ping,
            "server/discover": self._discover,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._resources_read,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "shutdown": self._shutdown,
        }

    def _route(self, request: _Request) -> Admitted:
        verdict = self._era.judge(request.method, request.params, is_request=True)
        if verdict.error is not None:
            raise JsonRpcError(verdict.error.code, verdict.error.message, verdict.error.data)
        modern = verdict.era == MODERN_ERA
        only_elsewhere = _LEGACY_ONLY if modern else _MODERN_ONLY
        if request.method not in self._handlers() or request.method in only_elsewhere:
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found")
        if request.method == SHUTDOWN and not self.surface.facts.answers_shutdown:
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found")  # the original has none
        if request.method in _RESOURCE_METHODS and "resources" not in self.surface.capabilities():
            # no resources capability declared: no resources listed or read (REQ-SPEC-RES-003)
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found")
        if modern and verdict.pinned:  # the opening request was checked already
            problem = pinned_envelope_problem(request.params)
            if problem is not None:
                raise JsonRpcError(problem.code, problem.message, problem.data)
        if request.method == "initialize":
            # what the client can be asked (sampling) is connection state: decided here, in
            # arrival order, so a tool call admitted next already sees it
            params = request.params if isinstance(request.params, dict) else {}
            declared = params.get("capabilities")
            self._client_capabilities = declared if isinstance(declared, dict) else {}
        capabilities = None if self._stateless else self._client_capabilities
        stream = not self._stateless and self.emit is not None
        return Admitted(
            request.id, request.method, request.params, modern, capabilities, session_stream=stream
        )

    def _decorate_modern(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        decorated = dict(result)
        decorated.setdefault("resultType", "complete")
        if method in _CACHE_HINTS:
            decorated["ttlMs"] = _CACHE_HINTS[method]
            decorated["cacheScope"] = "private"
        decorated["_meta"] = {META_SERVER_INFO: self._server_info()}
        return decorated

    def _server_info(self) -> dict[str, Any]:
        return {"name": "qmd", "version": self.surface.server_version}

    def _initialize(self, params: Any) -> dict[str, Any]:
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        version = requested if requested in LEGACY_VERSIONS else LATEST_LEGACY
        running = self._running
        subscriptions = running is not None and running.session_stream and self._watchable()
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": served_capabilities(self.surface.capabilities(), subscriptions),
            "serverInfo": self._server_info(),
        }
        instructions = self.surface.instructions()
        if instructions is not None:
            result["instructions"] = instructions
        return result

    def _ping(self, _params: Any) -> dict[str, Any]:
        return {}

    def _shutdown(self, _params: Any) -> dict[str, Any]:
        """seed 001's `shutdown`: acknowledged with an empty result; the stdio transport then
        ends the session as at the end of its input (REQ-SPEC-SHUTDOWN-001)."""
        return {}

    def _discover(self, _params: Any) -> dict[str, Any]:
        # the 2026-07-28 era has no resources/subscribe (its subscriptions/listen is not
        # offered for resources): not declared there (REQ-MCP-SSE-006)
        result: dict[str, Any] = {
            "supportedVersions": [MODERN],
            "capabilities": served_capabilities(self.surface.capabilities(), False),
        }
        instructions = self.surface.instructions()
        if instructions is not None:
            result["instructions"] = instructions
        return result

    def _tools_list(self, _params: Any) -> dict[str, Any]:
        return {"tools": self.surface.tools()}

    def _tools_call(self, params: Any) -> dict[str, Any]:
        if not isinstance(params, dict):
            got = "undefined" if params is None else js_type(params)
            raise self.surface.wording.bad_param("tools/call", ["params"], "object", got)
        name = params.get("name")
        if not isinstance(name, str):
            got = "undefined" if "name" not in params else js_type(name)
            raise self.surface.wording.bad_param("tools/call", ["params", "name"], "string", got)
        listed = [tool["name"] for tool in self.surface.tools()]
        if name not in listed:
            if self.surface.facts.failures_as_data:  # seed 001 (REQ-SPEC-ERR-002)
                return unknown_tool(name, listed)
            raise JsonRpcError(INVALID_PARAMS, f"Tool {name} not found")
        return self.surface.call_tool(name, params.get("arguments"), self._context(params))

    def _context(self, params: dict[str, Any]) -> CallContext:
        running = self._running
        era = "modern" if running is not None and running.modern else "legacy"
        if era == "modern":
            meta = params.get("_meta")
            declared = meta.get(META_CAPABILITIES) if isinstance(meta, dict) else None
            responses = params.get("inputResponses")
            state = params.get("requestState")
            return CallContext(
                era,
                declared if isinstance(declared, dict) else {},
                input_responses=responses if isinstance(responses, dict) else None,
                request_state=state if isinstance(state, str) else None,
                commit=self._commit(),
            )
        capabilities = running.client_capabilities if running is not None else None
        return CallContext(era, capabilities, self._asker(params), commit=self._commit())

    def _commit(self) -> Callable[[], bool] | None:
        return self.job.commit if self.job is not None else None

    def _asker(self, call: dict[str, Any]) -> Ask | None:
        emit, outgoing, owner, job = self.emit, self.outgoing, self.owner, self.job
        if emit is None or outgoing is None:
            return None
        watch = job.on_cancel if job is not None else None
        token = progress_token(call)
        progress = WaitProgress(emit, token) if token is not None else None
        every = job.progress_every_s if job is not None else None

        def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
            # a cancelled call (client gone, cancel, time limit) ends its wait at once; the
            # wait itself ends a little before the call's time limit, so that the tool still
            # answers (what it did, and that the client did not answer) within it
            deadline = job.deadline if job is not None else None
            timeout = DEFAULT_TIMEOUT_S
            if deadline is not None:
                left = deadline - time.monotonic()
                timeout = left - min(CLIENT_WAIT_RESERVE_S, left * CLIENT_WAIT_RESERVE_SHARE)
            # the model-lane slot is lent while the client works (REQ-MCP-LANE-001)
            waiting = job.waiting_on_client() if job is not None else nullcontext()
            with waiting:
                return outgoing.request(
                    emit,
                    method,
                    params,
                    max(0.0, timeout),
                    owner=owner,
                    watch=watch,
                    progress=progress,
                    progress_every_s=every or DEFAULT_PROGRESS_EVERY_S,
                )

        return ask

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to the client, where the transport has a way to it."""
        if self.emit is not None:
            try:
                self.emit({"jsonrpc": "2.0", "method": method, "params": params})
            except (OSError, ClientRequestError):
                log.info("could not deliver %s", method)

    def _watchable(self) -> bool:
        return self.surface.facts.subscribable

    def _subscription_uri(self, params: Any) -> str:
        if not self._watchable() or self._stateless or self.emit is None:
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found")
        uri = params.get("uri") if isinstance(params, dict) else None
        if not isinstance(uri, str):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: uri must be a string")
        return uri

    def _subscribe(self, params: Any) -> dict[str, Any]:
        uri = self._subscription_uri(params)
        if self.subscriptions is not None:  # sessions sharing the surface: each its own
            self.subscriptions.subscribe(uri, self, self.notify)
        else:
            self.surface.subscribe(uri, self.notify)
        return {}

    def _unsubscribe(self, params: Any) -> dict[str, Any]:
        uri = self._subscription_uri(params)
        if self.subscriptions is not None:
            self.subscriptions.unsubscribe(uri, self)
        else:
            self.surface.unsubscribe(uri)
        return {}

    def _resources_list(self, _params: Any) -> dict[str, Any]:
        return {"resources": []}

    def _templates_list(self, _params: Any) -> dict[str, Any]:
        return {"resourceTemplates": self.surface.resource_templates()}

    def _resources_read(self, params: Any) -> dict[str, Any]:
        uri = params.get("uri") if isinstance(params, dict) else None
        if not isinstance(uri, str):
            absent = not isinstance(params, dict) or "uri" not in params
            got = "undefined" if absent else js_type(uri)
            path = ["params", "uri"] if isinstance(params, dict) else ["params"]
            raise self.surface.wording.bad_param("resources/read", path, "string", got)
        if self.surface.facts.failures_as_data:  # seed 001 (REQ-SPEC-ERR-003)
            foreign = outside_templates(uri, self.surface.resource_templates())
            if foreign is not None:
                return foreign
        return self.surface.read_resource(uri)

    def _prompts_list(self, _params: Any) -> dict[str, Any]:
        prompts = self.surface.prompts()
        if prompts is None:
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found")
        return {"prompts": prompts}

    def _prompts_get(self, params: Any) -> dict[str, Any]:
        if self.surface.prompts() is None:
            raise JsonRpcError(METHOD_NOT_FOUND, "Method not found")
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(name, str):
            raise JsonRpcError(INVALID_PARAMS, "Invalid prompts/get request: name is required")
        arguments = params.get("arguments") if isinstance(params, dict) else None
        return self.surface.get_prompt(name, arguments)
