"""JSON-RPC 2.0 for MCP, in the order a message meets it: the frame's wire policy, the
connection's protocol era, then the session that checks the message and dispatches its method.

**Frames** (REQ-WIRE-*). Decoding: a frame is UTF-8 JSON text in the RFC 8259 grammar;
`NaN`/`Infinity` literals are not JSON, and a parser that gives up on nesting is a rejection,
not a crash. What JSON's grammar allows but a reply could not carry faithfully is then found by
`find_unrepresentable`: nesting deeper than MAX_DEPTH, numbers outside the double range
(`1e999`), and strings holding a lone surrogate escape (`"\\udc00"`, text that is not
Unicode); the session decides which JSON-RPC error each answers. Encoding: every reply is
strict JSON in UTF-8 whatever reaches the encoder: integral floats are written the JavaScript
way (`1`, not `1.0`), a non-finite float becomes `null` (what JavaScript's JSON.stringify
writes) and a lone surrogate becomes U+FFFD, so writing a reply can never raise and never
emits `NaN`, `Infinity` or text that is not UTF-8. Every transport decodes and encodes with
these functions (stdio, Streamable HTTP, the legacy SSE transport, REST).

**Eras** (REQ-MCP-ERA-002, REQ-MCP-ERA-006). The original's stdio entry (`serveStdio` of
@modelcontextprotocol/server 2.0.0) decides the era once per connection, from its opening
messages, and then keeps it (`ConnectionEra`):

* a message without an envelope claim (or `initialize` without a valid 2026-07-28 envelope)
  makes the connection 2025-era: later envelopes are ignored, never validated;
* `server/discover` with a valid envelope is answered in 2026-07-28 but is only a probe: more
  discovers stay undecided, and a message without a claim still makes it 2025-era;
* any other message with a valid envelope makes the connection 2026-07-28-era: from then on a
  request needs the envelope, and `initialize` is refused with -32022;
* an envelope error while undecided (bad envelope, unknown revision) decides nothing.

The 2026-07-28 era is stateless (validated envelope, decorated results, no
`initialize`/`ping`), the 2025 era has the `initialize` handshake.

**Session.** `Session` turns the era's verdicts into replies and hands each request to its
method's handler; what the tools do is the business of a `Surface`.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from adapters.mcp.outgoing import (
    DEFAULT_PROGRESS_EVERY_S,
    DEFAULT_TIMEOUT_S,
    ClientRequestError,
    Correlator,
    Emit,
)
from adapters.mcp.progress import WaitProgress, progress_token
from adapters.mcp.subscriptions import SubscriptionHub
from adapters.mcp.tools import (
    Ask,
    CallContext,
    SurfaceFacts,
    js_type,
    outside_templates,
    unknown_tool,
)
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

log = logging.getLogger("qmd.mcp")


# -- frames: the one decoding and encoding policy (REQ-WIRE-*) --------------------------------

# Deep enough for any MCP message (tool arguments nest about 6 levels), shallow enough that
# no recursive code on the way (validation, encoding) can exhaust the stack.
MAX_DEPTH = 64
# Longer integer literals are read as doubles (as JavaScript does), so a huge one becomes a
# non-finite number instead of tripping Python's int-conversion limit.
_MAX_INT_DIGITS = 300
_SURROGATE = re.compile("[\ud800-\udfff]")


class FrameError(Exception):
    """A frame that could not be decoded; `code` is the JSON-RPC error it is answered with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_int(literal: str) -> int | float:
    return int(literal) if len(literal) <= _MAX_INT_DIGITS else float(literal)


def decode_frame(data: bytes | str) -> Any:
    """Parse one frame; raises FrameError(-32700) or FrameError(-32600) for a deep one."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise FrameError(PARSE_ERROR, "Parse error: the message is not valid UTF-8") from None
    try:
        return json.loads(text, parse_constant=_no_constants, parse_int=_parse_int)
    except RecursionError:
        raise FrameError(
            INVALID_REQUEST, f"Invalid Request: nested deeper than {MAX_DEPTH} levels"
        ) from None
    except ValueError:
        raise FrameError(PARSE_ERROR, "Parse error") from None


def has_lone_surrogate(text: str) -> bool:
    # Decoded JSON pairs valid surrogate escapes into one character, so any left is lone.
    return not text.isascii() and _SURROGATE.search(text) is not None


def find_unrepresentable(value: Any, where: str = "") -> str | None:
    """Describe the first value a strict reply could not carry, or None when there is none.

    Iterative, so a hostile nesting depth costs no stack.
    """
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"{path or 'the message'}: nested deeper than {MAX_DEPTH} levels"
        if isinstance(item, float) and not math.isfinite(item):
            return f"{path}: number outside the range of a double"
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return f"{path}: string holds a lone surrogate escape (not Unicode text)"
        elif isinstance(item, dict):
            for key, child in item.items():
                if has_lone_surrogate(key):
                    return f"{path}: member name holds a lone surrogate escape"
                stack.append((child, f"{path}.{key}" if path else key, depth + 1))
        elif isinstance(item, list):
            for index, child in enumerate(item):
                stack.append((child, f"{path}[{index}]", depth + 1))
    return None


def valid_id(value: Any) -> bool:
    """A request id: Unicode text, or an integral number a double holds exactly (REQ-WIRE-ID-001).

    The original (its SDK checks `z.number().int()`) drops fractional and non-finite ids too.
    """
    if isinstance(value, str):
        return not has_lone_surrogate(value)
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def replace_lone_surrogates(value: Any) -> Any:
    """Every string with its lone surrogates replaced by U+FFFD, as the original's storage
    reads them (JavaScript writes a lone surrogate to UTF-8 as U+FFFD). Depth is bounded by
    the caller (MAX_DEPTH)."""
    if isinstance(value, str):
        return _strict_text(value)
    if isinstance(value, dict):
        return {_strict_text(key): replace_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [replace_lone_surrogates(item) for item in value]
    return value


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return False


def _strict_text(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text) if has_lone_surrogate(text) else text


def _wire_value(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < 2**53:
            return int(value)  # JavaScript has one number type: `1`, not `1.0`
        return value
    if isinstance(value, str):
        return _strict_text(value)
    if isinstance(value, dict):
        return {_strict_text(str(key)): _wire_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_wire_value(item) for item in value]
    return value


def encode_json(value: Any) -> bytes:
    """Strict JSON in UTF-8 as JavaScript's `JSON.stringify` writes it (integral floats as
    `1`); never raises on content. The REST replies use it too."""
    text = json.dumps(
        _wire_value(value), ensure_ascii=False, allow_nan=False, separators=(",", ":")
    )
    return text.encode("utf-8")


def encode_frame(message: dict[str, Any]) -> bytes:
    """One line of strict JSON in UTF-8, ending in `\\n`; never raises on content."""
    return encode_json(message) + b"\n"


# -- eras: which protocol era one connection speaks ---------------------------------------

# The `_meta` keys the SDK lifts into the per-request envelope of a pinned 2026 connection.
_ENVELOPE_KEYS = (
    META_VERSION,
    "io.modelcontextprotocol/clientInfo",
    META_CAPABILITIES,
    "io.modelcontextprotocol/logLevel",
)
MISSING_ENVELOPE = (
    f"Request is missing the required _meta envelope for protocol revision {MODERN} "
    f"({META_VERSION}, {META_CAPABILITIES})"
)


LEGACY = "legacy"
MODERN_ERA = "modern"
_OPENING, _PROBE = "opening", "probe"


@dataclass(frozen=True)
class EraError:
    """A JSON-RPC error the era rules give instead of serving the message."""

    code: int
    message: str
    data: Any = None


@dataclass(frozen=True)
class Verdict:
    era: str  # LEGACY or MODERN_ERA: how to serve the message
    error: EraError | None = None  # set: answer this instead (requests only)
    pinned: bool = False  # the connection was already decided before this message


def _meta_of(params: Any) -> dict[str, Any] | None:
    if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
        meta: dict[str, Any] = params["_meta"]
        return meta
    return None


def _claim(params: Any) -> dict[str, Any] | None:
    """The `_meta` of a message that claims an era (names a protocol version), else None."""
    meta = _meta_of(params)
    return meta if meta is not None and META_VERSION in meta else None


def _opening_problem(meta: dict[str, Any]) -> EraError | None:
    """Why an envelope claim cannot open a 2026-07-28 connection (None: it can)."""
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        problem = "missing" if META_CAPABILITIES not in meta else "invalid"
        return EraError(
            INVALID_PARAMS,
            f"Invalid _meta envelope for protocol revision {MODERN}: "
            f"{META_CAPABILITIES}: {problem}",
            {"envelope": {"key": META_CAPABILITIES, "problem": problem}},
        )
    version = meta.get(META_VERSION)
    if version != MODERN:
        requested = version if isinstance(version, str) else "unknown"
        return EraError(
            UNSUPPORTED_VERSION,
            f"Unsupported protocol version: {requested}",
            {"supported": [MODERN], "requested": requested},
        )
    return None


def _valid_modern_claim(params: Any) -> bool:
    meta = _claim(params)
    return meta is not None and _opening_problem(meta) is None


def _initialize_refusal(params: Any) -> EraError:
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    if not isinstance(requested, str):
        return EraError(
            UNSUPPORTED_VERSION,
            "Unsupported protocol version: the request did not name a protocol version",
            {"supported": [MODERN]},
        )
    return EraError(
        UNSUPPORTED_VERSION,
        f"Unsupported protocol version: {requested}",
        {"supported": [MODERN], "requested": requested},
    )


def pinned_envelope_problem(params: Any) -> EraError | None:
    """On a 2026-07-28 connection: what is wrong with a request's envelope (None: nothing).

    Checked after the method is known, as the SDK does; the revision it names is not checked.
    """
    meta = _meta_of(params)
    if meta is None or not any(key in meta for key in _ENVELOPE_KEYS):
        return EraError(INVALID_PARAMS, MISSING_ENVELOPE)
    issues = []
    if not isinstance(meta.get(META_VERSION), str):
        got = "undefined" if META_VERSION not in meta else js_type(meta[META_VERSION])
        issues.append(f"Invalid input: expected string, received {got}")
    capabilities = meta.get(META_CAPABILITIES)
    if not isinstance(capabilities, dict):
        got = "undefined" if META_CAPABILITIES not in meta else js_type(capabilities)
        issues.append(f"Invalid input: expected object, received {got}")
    if issues:
        return EraError(
            INVALID_PARAMS,
            f"Invalid _meta envelope for protocol revision {MODERN}: {'; '.join(issues)}",
        )
    return None


class ConnectionEra:
    """The era state of one connection; feed it every request and notification in order."""

    def __init__(self) -> None:
        self._phase = _OPENING

    def judge(self, method: str, params: Any, is_request: bool) -> Verdict:
        if self._phase == LEGACY:
            return Verdict(LEGACY, pinned=True)
        if self._phase == MODERN_ERA:
            if method == "initialize" and not _valid_modern_claim(params):
                return Verdict(MODERN_ERA, _initialize_refusal(params), pinned=True)
            return Verdict(MODERN_ERA, pinned=True)
        meta = _claim(params)
        if meta is None or (method == "initialize" and not _valid_modern_claim(params)):
            self._phase = LEGACY
            return Verdict(LEGACY)
        problem = _opening_problem(meta)
        if problem is not None:
            return Verdict(MODERN_ERA, problem)  # decides nothing
        if method == "server/discover" and is_request:
            self._phase = _PROBE
        elif not (self._phase == _PROBE and not is_request):
            self._phase = MODERN_ERA
        return Verdict(MODERN_ERA)


# -- the session ------------------------------------------------------------------------------

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
    if not valid_id(request_id):
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
        """One frame, decoded by the wire policy above (REQ-WIRE-*)."""
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
                request_id if valid_id(request_id) else None,
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
                INVALID_REQUEST, "Invalid Request", request_id if valid_id(request_id) else None
            )
        method = message.get("method")
        if not isinstance(method, str):
            if has_id and ("result" in message or "error" in message):
                if self.outgoing is not None:  # a response to one of our requests
                    self.outgoing.deliver(message)
                return None
            return self.malformed(
                INVALID_REQUEST, "Invalid Request", request_id if valid_id(request_id) else None
            )
        if not has_id:
            # notifications need no reply (unknown ones are ignored), but may decide the era
            self._era.judge(method, message.get("params"), is_request=False)
            return cancel_notice(method, message.get("params"))
        if not valid_id(request_id):
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
