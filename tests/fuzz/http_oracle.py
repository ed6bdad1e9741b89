"""The HTTP fuzzer's oracle, written from docs/spec/http.md (REQ-MCP-HTTP-002..006, the
service rules beside them) and the wire requirements (REQ-WIRE-*, through tests/fuzz/oracle.py
for each message a POST carries), independently of the server's code.

`expect` says what a request must be answered with; `judge` lists what is wrong with an
answer. Every body must be strict JSON (or the exact SSE framing of strict JSON events).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.fuzz import oracle
from tests.fuzz.http_frames import BODY_LIMIT, LEGACY_VERSIONS, MODERN, NAMED, HttpRequest

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
ANY_ID = object()  # a transport error whose id the spec leaves open (a number, string or null)
NOT_FOUND = b"Not Found"
SERVER_ERROR = b"Internal Server Error"


@dataclass(frozen=True)
class HttpExpectation:
    """`kind`: `error` (a transport error: `status`, `code`, `request_id`), `dispatch` (the
    messages are served: `replies` says per message whether one is due; SSE events in the
    2025 era, one JSON body in 2026-07-28, 202 and no body when none is due), `not-found`,
    `health`, `rest`, `too-large` or `head` (only the status: a HEAD answer has no body)."""

    kind: str
    status: int = 200
    code: int | None = None
    request_id: Any = ANY_ID
    replies: tuple[oracle.Expectation, ...] = ()
    modern: bool = False
    malformed: bool = False  # a REST body that is not JSON (REQ-WIRE-PARSE/DEPTH-001)
    rest_body: Any = None


def _error(status: int, code: int, request_id: Any = ANY_ID) -> HttpExpectation:
    return HttpExpectation("error", status, code, request_id)


def _loopback_ok(request: HttpRequest) -> bool:
    if request.origin is not None and not request.origin[1]:
        return False
    return request.host is None or request.host[1]


def expect(request: HttpRequest, compat: bool) -> HttpExpectation:
    found = _expect(request, compat)
    if request.method == "HEAD":  # the status a GET would get, and no body
        status = 200 if found.kind in ("health", "dispatch", "rest") else found.status
        return HttpExpectation("head", status)
    return found


def _expect(request: HttpRequest, compat: bool) -> HttpExpectation:
    if not _loopback_ok(request):
        return _error(403, -32003, None)  # REQ-MCP-HTTP-006: before any routing
    path, method = request.path, request.method
    if path == "/health":  # REQ-MCP-HTTP-004
        if method == "GET":
            return HttpExpectation("health")
        return HttpExpectation("not-found", 404)
    if path in ("/query", "/search"):
        if method != "POST":
            return HttpExpectation("not-found", 404)
        if len(request.body or b"") > BODY_LIMIT:
            return HttpExpectation("too-large", 413)
        try:
            body = oracle.loads(request.body or b"")
        except (ValueError, RecursionError):
            return HttpExpectation("rest", malformed=True)
        return HttpExpectation("rest", malformed=_too_deep(body), rest_body=body)
    if path != "/mcp":
        return HttpExpectation("not-found", 404)
    if method != "POST":  # REQ-MCP-HTTP-002
        return _error(405, -32000, None)
    if len(request.body or b"") > BODY_LIMIT:
        return HttpExpectation("too-large", 413)
    return _expect_mcp(request, compat)


def _expect_mcp(request: HttpRequest, compat: bool) -> HttpExpectation:
    """POST /mcp, in the order REQ-MCP-HTTP-002/003 state the checks."""
    if "application/json" not in (request.header("content-type") or "").lower():
        return _error(415, -32000, None)
    header_version = request.header("mcp-protocol-version")
    if header_version != MODERN:  # the era is known from the header before the body is read
        accept = (request.header("accept") or "").lower()
        if "application/json" not in accept or "text/event-stream" not in accept:
            return _error(406, -32000, None)
    try:
        body = oracle.loads(request.body or b"")
    except RecursionError:
        return _error(400, -32600, None)  # REQ-WIRE-DEPTH-001: too deep to read
    except ValueError:  # UnicodeDecodeError included
        return _error(400, -32700, None)
    if isinstance(body, list):
        if not body:
            return _error(400, -32600, None)
        if header_version == MODERN or any(_envelope(m) is not None for m in body):
            return _error(400, -32600, None)
        if not all(_is_message(m) for m in body) or any(_too_deep(m) for m in body):
            return _error(400, -32600, None)
        return _dispatch(body, compat, modern=False)
    if not _is_message(body) or _too_deep(body):
        request_id = body.get("id") if isinstance(body, dict) else None
        return _error(400, -32600, request_id if oracle.valid_id(request_id) else ANY_ID)
    request_id = body["id"] if oracle.valid_id(body.get("id")) else ANY_ID
    envelope = _envelope(body)
    if envelope is not None or header_version == MODERN:
        refusal = _modern_refusal(request, body, envelope, header_version, request_id)
        return refusal or _dispatch([body], compat, modern=True)
    if header_version is not None and header_version not in LEGACY_VERSIONS:
        return _error(400, -32000, None)
    return _dispatch([body], compat, modern=False)


def _modern_refusal(
    request: HttpRequest,
    body: dict[str, Any],
    envelope: dict[str, Any] | None,
    header_version: str | None,
    request_id: Any,
) -> HttpExpectation | None:
    if envelope is None:
        return _error(400, -32602, request_id)
    version = envelope.get(META_VERSION)
    if header_version is not None and header_version != version:
        return _error(400, -32020, request_id)
    if version != MODERN:
        return _error(400, -32022, request_id)
    if not isinstance(envelope.get(META_CAPABILITIES), dict):
        return _error(400, -32602, request_id)
    if request.header("mcp-method") != body.get("method"):
        return _error(400, -32020, request_id)
    key = NAMED.get(str(body.get("method")))
    params = body.get("params")
    named = key is not None and isinstance(params, dict) and key in params
    if named and request.header("mcp-name") != params[key]:
        return _error(400, -32020, request_id)
    return None


def _envelope(message: Any) -> dict[str, Any] | None:
    if not isinstance(message, dict):
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) and META_VERSION in meta else None


def _id_shaped(value: Any) -> bool:
    """The transport's notion of an id (JSON-RPC: a string or a number); whether it is usable
    (REQ-WIRE-ID-001) is the message oracle's question."""
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def _is_message(message: Any) -> bool:
    """A JSON-RPC 2.0 request, notification or response (REQ-MCP-HTTP-002: anything else in a
    body is 400 -32600)."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if isinstance(message.get("method"), str):
        return "id" not in message or _id_shaped(message["id"])
    return _id_shaped(message.get("id")) and ("result" in message or "error" in message)


def _too_deep(message: Any) -> bool:
    depth, _ = oracle.depth_and_bad_values(message)
    return depth > oracle.MAX_DEPTH


def _dispatch(messages: list[Any], compat: bool, modern: bool) -> HttpExpectation:
    replies = tuple(oracle.expect_message(m, answers_malformed=not compat) for m in messages)
    return HttpExpectation("dispatch", replies=replies, modern=modern)


# -- judging ---------------------------------------------------------------------------------


def _strict(body: bytes) -> Any:
    return oracle.strict_parse(body)


def sse_events(body: bytes) -> list[bytes] | None:
    """The data of each `event: message` block, or None when the framing is off."""
    if not body.endswith(b"\n\n"):
        return None
    events = []
    for block in body[:-2].split(b"\n\n"):
        head, _, data = block.partition(b"\ndata: ")
        if head != b"event: message" or b"\n" in data:
            return None
        events.append(data)
    return events


def judge(
    expectation: HttpExpectation,
    status: int,
    headers: dict[str, str],
    body: bytes,
    compat: bool,
    tool_codes: bool | None = None,
) -> tuple[list[str], bool]:
    """(what is wrong, whether a body was not strict JSON). `tool_codes` as in
    `oracle.violations`."""
    kind = expectation.kind
    content_type = headers.get("content-type")
    if kind == "head":
        problems = [] if status == expectation.status else [f"status {status}"]
        return problems + ([f"HEAD answered a body of {len(body)}"] if body else []), False
    if kind == "not-found":
        wrong = status != 404 or body != NOT_FOUND or content_type is not None
        return ([f"expected 404 Not Found, got {status} {content_type} {body[:80]!r}"]
                if wrong else []), False  # fmt: skip
    if kind == "too-large":
        if status != 413:
            return [f"expected 413, got {status}"], False
        try:
            _strict(body)
        except ValueError:
            return ["413 body is not strict JSON"], True
        return [], False
    if kind == "dispatch":
        return _judge_dispatch(expectation, status, content_type, body, compat, tool_codes)
    original_500 = expectation.malformed or (status == 500 and _past_the_searches(expectation))
    if kind == "rest" and compat and original_500:  # REQ-MCP-HTTP-005: the original's 500
        ok = status == 500 and body == SERVER_ERROR
        return ([] if ok else [f"expected the bare 500, got {status} {body[:120]!r}"]), False
    try:
        value = _strict(body)
    except ValueError:
        return [f"non-strict body ({status}): {body[:200]!r}"], True
    if content_type != "application/json":
        return [f"content type {content_type!r} for a JSON body"], False
    if kind == "health":
        ok = status == 200 and isinstance(value, dict) and value.get("status") == "ok"
        uptime = value.get("uptime") if isinstance(value, dict) else None
        ok = ok and isinstance(uptime, int) and not isinstance(uptime, bool) and uptime >= 0
        return ([] if ok else [f"health answered {status} {body[:120]!r}"]), False
    if kind == "rest":
        return _judge_rest(status, value, expectation.malformed), False
    return _judge_error(expectation, status, value), False


def _past_the_searches(expectation: HttpExpectation) -> bool:
    """A REST body with a `searches` array: a search the original fails on (an entry that is
    not an object, a query over a bound) is its bare 500 on the compat surface. The default
    surface answers the same bodies 400 with the reason, through the same code, so an
    internal failure hiding behind a compat 500 would show there."""
    body = expectation.rest_body
    return isinstance(body, dict) and isinstance(body.get("searches"), list)


def _judge_rest(status: int, value: Any, malformed: bool) -> list[str]:
    if malformed and status != 400:
        return [f"a body that is not JSON answered {status}"]
    if status == 200:
        results = value.get("results") if isinstance(value, dict) else None
        if not isinstance(results, list):
            return ["REST 200 without a results array"]
        return (
            []
            if all(isinstance(r, dict) and "file" in r for r in results)
            else ["REST result without a file"]
        )
    if status == 400:
        ok = isinstance(value, dict) and isinstance(value.get("error"), str)
        return [] if ok else ["REST 400 without an error message"]
    return [f"REST answered {status}"]


def _judge_error(expectation: HttpExpectation, status: int, value: Any) -> list[str]:
    problems = []
    if status != expectation.status:
        problems.append(f"status {status} != {expectation.status}")
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0" or "result" in value:
        return [*problems, "not a JSON-RPC error"]
    error = value.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return [*problems, "error without a message"]
    if error.get("code") != expectation.code:
        problems.append(f"code {error.get('code')} != {expectation.code}")
    got = value.get("id", "(absent)")
    if expectation.request_id is ANY_ID:
        if not (got is None or _id_shaped(got)):
            problems.append(f"id {got!r} is not an id")
    elif not oracle.same_id(expectation.request_id, got):
        problems.append(f"id {got!r} != {expectation.request_id!r}")
    return problems


def _judge_dispatch(
    expectation: HttpExpectation,
    status: int,
    content_type: str | None,
    body: bytes,
    compat: bool,
    tool_codes: bool | None = None,
) -> tuple[list[str], bool]:
    due = [e for e in expectation.replies if e.reply]
    if not due:
        ok = status == 202 and not body
        return ([] if ok else [f"expected 202 and no body, got {status} {body[:120]!r}"]), False
    if expectation.modern:
        raw_replies = [body]
        if content_type != "application/json":
            return [f"2026-07-28 reply with content type {content_type!r}"], False
    else:
        if content_type != "text/event-stream":
            return [f"2025 reply with content type {content_type!r} ({status})"], False
        events = sse_events(body)
        if events is None:
            return [f"SSE framing is off: {body[:200]!r}"], False
        raw_replies = events
    problems: list[str] = []
    if len(raw_replies) != len(due):
        problems.append(f"{len(raw_replies)} replies for {len(due)} requests")
    for expected, raw in zip(due, raw_replies, strict=False):
        try:
            reply = _strict(raw)
        except ValueError:
            return [*problems, f"non-strict reply {raw[:200]!r}"], True
        problems += oracle.violations(
            expected, reply, answers_malformed=not compat, tool_codes=tool_codes
        )
        if expectation.modern:
            error = reply.get("error") if isinstance(reply, dict) else None
            code = error.get("code") if isinstance(error, dict) else None
            # -32601 is 404; -32021 (a missing client capability) is 400 by the revision,
            # which issue 22 finding 11 brings the server to: both are accepted here
            allowed = {-32601: {404}, -32021: {200, 400}}.get(code, {200})
            if status not in allowed:
                problems.append(f"status {status} for {json.dumps(reply)[:120]}")
    if not expectation.modern and status != 200:
        problems.append(f"SSE answer with status {status}")
    return problems, False
