"""The fuzzer's oracle, written from docs/spec (REQ-MCP-STDIO-*, REQ-SPEC-RPC-*, REQ-WIRE-*)
independently of the server's code: what a sent line must be answered with, and whether a
reply line is strict JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

MAX_DEPTH = 64
# -32021: a 2026-07-28 request lacking a client capability the tool needs (REQ-MEM-MERGE-004)
JSONRPC_CODES = frozenset({-32700, -32600, -32601, -32602, -32603, -32021, -32022})
TOOL_ERROR_CODES = frozenset(
    {"invalid-argument", "not-found", "out-of-root", "excluded-by-ignore", "conflict",
     "unavailable", "model-unavailable", "internal-error"}
)  # fmt: skip


@dataclass(frozen=True)
class Expectation:
    """`reply`: whether exactly one reply is due (else none); `id`: the id it must carry;
    `code`: the JSON-RPC error code it must carry, when the spec fixes one."""

    reply: bool
    id: Any = None
    code: int | None = None
    # REQ-WIRE-DEPTH-001: a frame nested past the bound carries its id "when it could be
    # read"; whether the server's decoder still reads one that deep is its own limit.
    id_may_be_null: bool = False


NO_REPLY = Expectation(False)


def _refuse(name: str) -> Any:
    raise ValueError(name)


def strict_parse(line: bytes) -> Any:
    """RFC 8259 JSON in UTF-8, no NaN/Infinity, no lone surrogate; raises ValueError."""
    value = json.loads(line.decode("utf-8"), parse_constant=_refuse)
    json.dumps(value, ensure_ascii=False).encode("utf-8")  # lone surrogates cannot encode
    return value


def _lone_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def depth_and_bad_values(value: Any) -> tuple[int, bool]:
    """Maximum nesting, and whether any number is non-finite or any string is not Unicode."""
    deepest, bad = 0, False
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, float):
            bad = bad or not math.isfinite(item)
        elif isinstance(item, str):
            bad = bad or _lone_surrogate(item)
        elif isinstance(item, dict):
            bad = bad or any(_lone_surrogate(k) for k in item)
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]
    return deepest, bad


def valid_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return not _lone_surrogate(value)
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def expect(line: bytes, answers_malformed: bool) -> Expectation:
    """What the spec says a line gets: `answers_malformed` is the default surface."""

    def malformed(code: int, request_id: Any = None) -> Expectation:
        return Expectation(True, request_id, code) if answers_malformed else NO_REPLY

    if not line.strip():
        return NO_REPLY  # REQ-SPEC-STDIO-001 / REQ-MCP-STDIO-002
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return malformed(-32700)
    try:
        message = json.loads(text, parse_constant=_refuse, parse_int=parse_int)
    except RecursionError:
        return malformed(-32600)
    except ValueError:
        return malformed(-32700)
    return expect_message(message, answers_malformed)


def expect_message(message: Any, answers_malformed: bool) -> Expectation:
    """What the spec says one decoded message gets (a frame's JSON, or a batch member)."""

    def malformed(code: int, request_id: Any = None) -> Expectation:
        return Expectation(True, request_id, code) if answers_malformed else NO_REPLY

    if not isinstance(message, dict):
        return malformed(-32600)
    depth, _ = depth_and_bad_values(message)
    raw_id = message.get("id")
    if depth > MAX_DEPTH:
        deep = malformed(-32600, raw_id if valid_id(raw_id) else None)
        return replace(deep, id_may_be_null=True) if deep.reply else deep
    if message.get("jsonrpc") != "2.0":
        return malformed(-32600, raw_id if valid_id(raw_id) else None)
    if not isinstance(message.get("method"), str):
        if "id" in message and ("result" in message or "error" in message):
            return NO_REPLY
        return malformed(-32600, raw_id if valid_id(raw_id) else None)
    if "id" not in message:
        return NO_REPLY  # a notification
    if not valid_id(raw_id):
        return malformed(-32600)
    _, bad = depth_and_bad_values(message.get("params"))
    if bad and answers_malformed:
        return Expectation(True, raw_id, -32602)
    return Expectation(True, raw_id)


def parse_int(literal: str) -> int | float:
    return int(literal) if len(literal) <= 300 else float(literal)


def same_id(expected: Any, got: Any) -> bool:
    """Ids compare with their JSON type (a string id never equals a number)."""
    if isinstance(expected, str) or isinstance(got, str):
        return isinstance(expected, str) and isinstance(got, str) and expected == got
    if expected is None or got is None:
        return expected is None and got is None
    return bool(expected == got)


def violations(
    expectation: Expectation,
    reply: Any,
    answers_malformed: bool,
    tool_codes: bool | None = None,
) -> list[str]:
    """What is wrong with a (strictly parsed) reply to a line with this expectation.
    `tool_codes`: whether an isError result must carry one of the default surface's stable
    codes (docs/spec/mcp-tools.md); by default where malformed messages are answered, as on
    the default surface. Other surfaces word their tool errors their own way."""
    problems: list[str] = []
    if not isinstance(reply, dict) or reply.get("jsonrpc") != "2.0":
        return ["reply is not a JSON-RPC 2.0 object"]
    if ("result" in reply) == ("error" in reply):
        problems.append("reply must carry exactly one of result and error")
    null_allowed = expectation.id_may_be_null and reply.get("id") is None
    if not null_allowed and not same_id(expectation.id, reply.get("id")):
        problems.append(f"reply id {reply.get('id')!r} != {expectation.id!r}")
    error = reply.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        if code not in JSONRPC_CODES:
            problems.append(f"unexpected error code {code!r}")
        if not isinstance(error, dict) or not isinstance(error.get("message"), str):
            problems.append("error without a message")
    if expectation.code is not None and (error is None or error.get("code") != expectation.code):
        problems.append(f"expected error {expectation.code}, got {error or 'a result'}")
    result = reply.get("result")
    check_codes = answers_malformed if tool_codes is None else tool_codes
    if check_codes and isinstance(result, dict) and result.get("isError"):
        structured = result.get("structuredContent")
        code = structured.get("error", {}).get("code") if isinstance(structured, dict) else None
        if code not in TOOL_ERROR_CODES:
            problems.append(f"isError result without a stable error code: {code!r}")
    return problems


def internal_error(reply: Any) -> bool:
    """A reply that reports an internal failure (a bug, though not a wire violation)."""
    if not isinstance(reply, dict):
        return False
    error = reply.get("error")
    if isinstance(error, dict) and error.get("code") == -32603:
        return "Invalid input" not in str(error.get("message"))  # REQ-RES-READ-006 is -32603
    result = reply.get("result")
    if isinstance(result, dict) and result.get("isError"):
        structured = result.get("structuredContent")
        if isinstance(structured, dict):
            return structured.get("error", {}).get("code") == "internal-error"
    return False


def loads(data: bytes) -> Any:
    """A body as JSON, as strictly as a frame: raises UnicodeDecodeError, ValueError (not
    JSON, `NaN` literals included) or RecursionError (nesting the decoder gives up on)."""
    return json.loads(data.decode("utf-8"), parse_constant=_refuse, parse_int=parse_int)
