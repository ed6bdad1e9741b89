"""The one decoding and encoding policy for JSON-RPC frames (docs/spec REQ-WIRE-*).

Decoding: a frame is UTF-8 JSON text in the RFC 8259 grammar; `NaN`/`Infinity` literals are
not JSON, and a parser that gives up on nesting is a rejection, not a crash. What JSON's
grammar allows but a reply could not carry faithfully is then found by `find_unrepresentable`:
nesting deeper than MAX_DEPTH, numbers outside the double range (`1e999`), and strings holding
a lone surrogate escape (`"\\udc00"`, text that is not Unicode). The session decides which
JSON-RPC error each answers (protocol.py).

Encoding: every reply is strict JSON in UTF-8 whatever reaches the encoder: integral floats are
written the JavaScript way (`1`, not `1.0`), a non-finite float becomes `null` (what
JavaScript's JSON.stringify writes) and a lone surrogate becomes U+FFFD, so writing a reply
can never raise and never emits `NaN`, `Infinity` or text that is not UTF-8.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

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


PARSE_ERROR = -32700
INVALID_REQUEST = -32600


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
