"""POST /mcp without I/O: the Streamable HTTP rules of the original's SDK
(`@modelcontextprotocol/server` 2.0.0, stateless, `responseMode: "json"`), around our `Session`.

`plan_mcp_request` looks at the method, headers and raw body and either answers at once (405,
415, 406, a parse error, a header/body disagreement) or hands back the messages to dispatch;
`answer` runs them through a `Session` and frames the replies the way the original does:
the 2025 era as Server-Sent Events (one `event: message` per reply), the 2026-07-28 era as
one plain JSON body, 202 with no body when nothing needs an answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters.mcp.protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    LEGACY_VERSIONS,
    MAX_DEPTH,
    META_CAPABILITIES,
    META_VERSION,
    METHOD_NOT_FOUND,
    MODERN,
    PARSE_ERROR,
    UNSUPPORTED_VERSION,
    FrameError,
    Session,
    decode_frame,
    depth_exceeds,
    encode_json,
)

HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
SERVER_ERROR = -32000
# What the original's SDK lists in its "Unsupported protocol version" answer.
SDK_LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07")
SSE_HEADERS = (("cache-control", "no-cache, no-transform"), ("x-accel-buffering", "no"))
# Methods whose target the 2026-07-28 era repeats in the `Mcp-Name` header.
_NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@dataclass(frozen=True)
class HttpReply:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class McpPlan:
    """What a POST /mcp asks for: an immediate reply, or messages to dispatch."""

    reply: HttpReply | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    modern: bool = False

    @property
    def label(self) -> str:
        """For the request log: the method, and the tool a `tools/call` names."""
        if not self.messages:
            return ""
        first = self.messages[0]
        method = str(first.get("method", "response"))
        params = first.get("params")
        if (
            method == "tools/call"
            and isinstance(params, dict)
            and isinstance(params.get("name"), str)
        ):
            return f"{method} {params['name']}"
        return method if len(self.messages) == 1 else f"{method} (+{len(self.messages) - 1})"

    def tool_calls(self) -> list[tuple[str, Any]]:
        """(tool name, arguments) of every `tools/call` in the plan."""
        calls = []
        for message in self.messages:
            params = message.get("params")
            if message.get("method") == "tools/call" and isinstance(params, dict):
                calls.append((str(params.get("name")), params.get("arguments")))
        return calls


def transport_error(
    status: int, code: int, message: str, request_id: Any = None, data: Any = None
) -> HttpReply:
    """An error the transport answers itself (key order `jsonrpc, error, id`, as the SDK)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = {"jsonrpc": "2.0", "error": error, "id": request_id}
    return HttpReply(status, encode_json(body), "application/json")


def method_not_allowed() -> HttpReply:
    return transport_error(405, SERVER_ERROR, "Method not allowed.")


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, int | float) and not isinstance(value, bool)
    )


def _is_message(message: Any) -> bool:
    """A JSON-RPC 2.0 request, notification or response, as the SDK's schema accepts."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if isinstance(message.get("method"), str):
        return "id" not in message or _valid_id(message["id"])
    return _valid_id(message.get("id")) and ("result" in message or "error" in message)


def _not_a_message(message: Any) -> HttpReply:
    request_id = message.get("id") if isinstance(message, dict) else None
    return transport_error(
        400,
        INVALID_REQUEST,
        "Bad Request: the request body is not a valid JSON-RPC message",
        request_id if _valid_id(request_id) else None,
    )


def _envelope(message: dict[str, Any]) -> dict[str, Any] | None:
    params = message.get("params")
    if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
        meta: dict[str, Any] = params["_meta"]
        if META_VERSION in meta:
            return meta
    return None


def _mismatch(request_id: Any, header: str | None, detail: str) -> HttpReply:
    return transport_error(
        400,
        HEADER_MISMATCH,
        f"Bad Request: the request headers and body disagree: {detail}",
        request_id,
        {"mismatch": {"header": header if header is not None else "(missing)", "body": detail}},
    )


def _js(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _check_modern(message: dict[str, Any], headers: Mapping[str, str]) -> HttpReply | None:
    """The 2026-07-28 rules: the body's envelope, and the headers that must repeat it."""
    request_id = message.get("id")
    header_version = headers.get("mcp-protocol-version")
    meta = _envelope(message)
    if meta is None:
        return transport_error(
            400,
            INVALID_PARAMS,
            f"Invalid params: the MCP-Protocol-Version header names protocol revision "
            f"{header_version}, but the request is missing the required per-request envelope "
            f"key(s): _meta",
            request_id,
            {"envelope": {"missing": ["_meta"]}},
        )
    version = meta.get(META_VERSION)
    if header_version is not None and header_version != version:
        return _mismatch(
            request_id,
            header_version,
            f"the body envelope names protocol version {version} but the "
            f"MCP-Protocol-Version header names {header_version}",
        )
    if version != MODERN:
        return transport_error(
            400,
            UNSUPPORTED_VERSION,
            f"Unsupported protocol version: {version}",
            request_id,
            {"supported": [MODERN], "requested": version},
        )
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        problem = "missing" if META_CAPABILITIES not in meta else "invalid"
        return transport_error(
            400,
            INVALID_PARAMS,
            f"Invalid _meta envelope for protocol revision {MODERN}: "
            f"{META_CAPABILITIES}: {problem}",
            request_id,
            {"envelope": {"key": META_CAPABILITIES, "problem": problem}},
        )
    method = str(message.get("method", ""))
    header_method = headers.get("mcp-method")
    if header_method is None:
        return _mismatch(
            request_id,
            None,
            f"the body names method {method} but the required Mcp-Method header is absent",
        )
    if header_method != method:
        return _mismatch(
            request_id,
            header_method,
            f"the body names method {method} but the Mcp-Method header names {header_method}",
        )
    key = _NAMED.get(method)
    params = message.get("params")
    if key is not None and isinstance(params, dict) and key in params:
        named = params[key]
        header_name = headers.get("mcp-name")
        if header_name is None:
            return _mismatch(
                request_id,
                None,
                f"the body carries params.{key}={_js(named)} but the required Mcp-Name "
                f"header is absent",
            )
        if header_name != named:
            return _mismatch(
                request_id,
                header_name,
                f"the body carries params.{key}={_js(named)} but the Mcp-Name header names "
                f"{_js(header_name)}",
            )
    return None


def plan_mcp_request(method: str, headers: Mapping[str, str], body: bytes) -> McpPlan:
    """`headers` with lower-case names. Checks in the order the original's SDK makes them."""
    if method != "POST":
        return McpPlan(reply=method_not_allowed())
    if "application/json" not in headers.get("content-type", "").lower():
        return McpPlan(
            reply=transport_error(
                415, SERVER_ERROR, "Unsupported Media Type: Content-Type must be application/json"
            )
        )
    header_version = headers.get("mcp-protocol-version")
    if header_version != MODERN:
        accept = headers.get("accept", "").lower()
        if "application/json" not in accept or "text/event-stream" not in accept:
            return McpPlan(
                reply=transport_error(
                    406,
                    SERVER_ERROR,
                    "Not Acceptable: Client must accept both application/json and "
                    "text/event-stream",
                )
            )
    try:  # the wire's one decoding policy (REQ-WIRE-PARSE-001, REQ-WIRE-DEPTH-001)
        parsed = decode_frame(body)
    except FrameError as failure:
        if failure.code != PARSE_ERROR:
            return McpPlan(reply=transport_error(400, failure.code, failure.message))
        return McpPlan(reply=transport_error(400, PARSE_ERROR, "Parse error: Invalid JSON"))
    if depth_exceeds(parsed):
        request_id = parsed.get("id") if isinstance(parsed, dict) else None
        return McpPlan(
            reply=transport_error(
                400,
                INVALID_REQUEST,
                f"Invalid Request: nested deeper than {MAX_DEPTH} levels",
                request_id if _valid_id(request_id) else None,
            )
        )
    if isinstance(parsed, list):
        if not parsed:
            return McpPlan(
                reply=transport_error(400, INVALID_REQUEST, "Bad Request: empty JSON-RPC batch")
            )
        if header_version == MODERN or any(
            isinstance(m, dict) and _envelope(m) is not None for m in parsed
        ):
            return McpPlan(
                reply=transport_error(
                    400,
                    INVALID_REQUEST,
                    f"Bad Request: JSON-RPC batches may not contain requests for protocol "
                    f"revision {MODERN} or later",
                )
            )
        invalid = next((m for m in parsed if not _is_message(m)), None)
        if invalid is not None:
            return McpPlan(reply=_not_a_message(None))
        return McpPlan(messages=list(parsed))
    if not _is_message(parsed):
        return McpPlan(reply=_not_a_message(parsed))
    if _envelope(parsed) is not None or header_version == MODERN:
        refusal = _check_modern(parsed, headers)
        if refusal is not None:
            return McpPlan(reply=refusal)
        return McpPlan(messages=[parsed], modern=True)
    if header_version is not None and header_version not in (*LEGACY_VERSIONS, "2024-10-07"):
        supported = ", ".join(SDK_LEGACY_VERSIONS)
        return McpPlan(
            reply=transport_error(
                400,
                SERVER_ERROR,
                f"Bad Request: Unsupported protocol version: {header_version} "
                f"(supported versions: {supported})",
            )
        )
    return McpPlan(messages=[parsed])


def sse_event(reply: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + encode_json(reply) + b"\n\n"


def frame_replies(plan: McpPlan, replies: list[dict[str, Any]]) -> HttpReply:
    """The HTTP answer to the replies a session gave for `plan.messages`."""
    if not replies:
        return HttpReply(202)
    if plan.modern:
        reply = replies[0]
        error = reply.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        status = _MODERN_ERROR_STATUS.get(code, 200) if isinstance(code, int) else 200
        return HttpReply(status, encode_json(reply), "application/json")
    body = b"".join(sse_event(reply) for reply in replies)
    return HttpReply(200, body, "text/event-stream", SSE_HEADERS)


# 2026-07-28: errors the revision answers with an HTTP status of their own (REQ-MCP-HTTP-010)
_MODERN_ERROR_STATUS = {METHOD_NOT_FOUND: 404, MISSING_CAPABILITY: 400}


def answer(session: Session, plan: McpPlan) -> HttpReply:
    """Dispatch the planned messages (in a worker thread) and frame the replies."""
    replies = [r for r in (session.handle_message(m) for m in plan.messages) if r is not None]
    return frame_replies(plan, replies)
