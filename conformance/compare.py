"""Structural comparison of parsed JSON, and JSON-path matchers for spec-written cases."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from conformance import jsonpath

WINDOW = 80  # characters shown on each side of the first difference of two strings


@dataclass(frozen=True)
class Difference:
    path: str
    expected: Any
    actual: Any
    note: str = ""
    at: int | None = None  # two strings: where they first differ

    def render(self) -> str:
        head = f"{self.path}: {self.note}" if self.note else f"{self.path}:"
        if self.at is not None and isinstance(self.expected, str) and isinstance(self.actual, str):
            shown = (window(self.expected, self.at), window(self.actual, self.at))
        else:
            shown = (_show(self.expected), _show(self.actual))
        return f"{head}\n    expected {shown[0]}\n    got      {shown[1]}"

    @property
    def kind(self) -> str:
        """The kind of difference, for grouping failures by root cause."""
        if self.note.startswith("strings differ"):
            return "strings differ"
        if self.note:  # its general part: no counts, no values the server sent
            general = re.split(r":|, got", self.note, maxsplit=1)[0]
            return re.sub(r"\d+", "N", general)[:80]
        if _json_type(self.expected) != _json_type(self.actual):
            return f"{_json_type(self.actual)} where {_json_type(self.expected)} was expected"
        return "value differs"


def window(text: str, at: int, width: int = WINDOW) -> str:
    """`text` around position `at`, ±width characters, JSON-escaped, cut ends marked with …"""
    start, end = max(0, at - width), min(len(text), at + width)
    body = json.dumps(text[start:end], ensure_ascii=False)
    return ("…" if start else "") + body + ("…" if end < len(text) else "")


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def _show(value: Any, limit: int = 600) -> str:
    if value is MISSING:
        return "<missing>"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _same_scalar(a: Any, b: Any) -> bool:
    # JSON has one number type: 1 and 1.0 are the same value, but true is not 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def tolerances(message: Any, rules: list[dict[str, Any]]) -> dict[str, float]:
    """Concrete paths of `message` whose numbers may differ by up to `abs` (a case's
    `tolerance` rules: scores computed by two llama.cpp builds agree only to a few digits)."""
    allowed: dict[str, float] = {}
    for rule in rules:
        for where, value in jsonpath.find(message, rule["path"]):
            if isinstance(value, int | float) and not isinstance(value, bool):
                allowed[where] = max(allowed.get(where, 0.0), float(rule["abs"]))
    return allowed


def diff(
    expected: Any, actual: Any, path: str = "$", tolerant: dict[str, float] | None = None
) -> list[Difference]:
    """Every place where actual differs from expected, deepest first-class path named.

    `tolerant` maps concrete paths to the absolute difference allowed between two numbers
    there (see `tolerances`); the field must still be present and a number.
    """
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[Difference] = []
        for key in expected:
            sub = jsonpath.child(path, key)
            if key not in actual:
                out.append(Difference(sub, expected[key], MISSING, "missing"))
            else:
                out += diff(expected[key], actual[key], sub, tolerant)
        for key in actual:
            if key not in expected:
                out.append(
                    Difference(jsonpath.child(path, key), MISSING, actual[key], "unexpected")
                )
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        out = []
        for idx in range(max(len(expected), len(actual))):
            sub = jsonpath.child(path, idx)
            if idx >= len(actual):
                out.append(Difference(sub, expected[idx], MISSING, "missing item"))
            elif idx >= len(expected):
                out.append(Difference(sub, MISSING, actual[idx], "unexpected item"))
            else:
                out += diff(expected[idx], actual[idx], sub, tolerant)
        return out
    if _same_scalar(expected, actual):
        return []
    if tolerant and path in tolerant and _close(expected, actual, tolerant[path]):
        return []
    if isinstance(expected, str) and isinstance(actual, str):
        at = first_difference(expected, actual)
        note = f"strings differ at char {at} (expected len {len(expected)}, got len {len(actual)})"
        return [Difference(path, expected, actual, note, at)]
    return [Difference(path, expected, actual)]


def _close(a: Any, b: Any, allowed: float) -> bool:
    numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
    return numbers and abs(float(a) - float(b)) <= allowed


def first_difference(a: str, b: str) -> int:
    return next(
        (n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


# --- matchers --------------------------------------------------------------------------

MATCH_OPS = (
    "equals",
    "absent",
    "present",
    "type",
    "contains",
    "notContains",
    "startsWith",
    "regex",
    "length",
    "oneOf",
    "descendingBy",
)


def check_matcher(message: Any, matcher: dict[str, Any]) -> list[Difference]:
    path = matcher["path"]
    nodes = list(jsonpath.find(message, path))
    inner = matcher.get("inJson")
    if inner is not None:
        # the nodes at `path` are strings holding JSON (a tool's text content, as seed 003's
        # LDIMS answers are); the checks apply to the nodes at `inJson` inside them
        parsed: list[tuple[str, Any]] = []
        for where, value in nodes:
            try:
                document = json.loads(value) if isinstance(value, str) else MISSING
            except ValueError:
                document = MISSING
            if document is MISSING:
                return [Difference(where, "a string holding JSON", value, "not JSON")]
            parsed += [(f"{where} {p}", v) for p, v in jsonpath.find(document, inner)]
        nodes, path = parsed, f"{path} {inner}"
    if matcher.get("absent"):
        return [Difference(p, MISSING, v, "must be absent") for p, v in nodes]
    if not nodes:
        wanted = {k: v for k, v in matcher.items() if k != "path"}
        return [Difference(path, wanted, MISSING, "no such node")]
    out: list[Difference] = []
    for where, value in nodes:
        out += _check_node(where, value, matcher)
    return out


def _check_node(where: str, value: Any, m: dict[str, Any]) -> list[Difference]:
    out: list[Difference] = []
    if "equals" in m:
        out += diff(m["equals"], value, where)
    if "type" in m:
        allowed = m["type"] if isinstance(m["type"], list) else [m["type"]]
        got = _json_type(value)
        ok = got in allowed or (got == "integer" and "number" in allowed)
        if not ok:
            out.append(Difference(where, f"type {allowed}", value, "wrong type"))
    if "contains" in m:
        needle = m["contains"]
        if isinstance(value, str):
            if not (isinstance(needle, str) and needle in value):
                out.append(Difference(where, f"a string containing {needle!r}", value))
        elif isinstance(value, list):
            if not any(not diff(needle, item) for item in value):
                out.append(Difference(where, f"an array containing {_show(needle)}", value))
        else:
            out.append(Difference(where, f"something containing {_show(needle)}", value))
    if "notContains" in m:
        needle = m["notContains"]
        if (isinstance(value, str) and isinstance(needle, str) and needle in value) or (
            isinstance(value, list) and any(not diff(needle, item) for item in value)
        ):
            out.append(Difference(where, f"nothing containing {_show(needle)}", value))
    if "startsWith" in m and not (isinstance(value, str) and value.startswith(m["startsWith"])):
        out.append(Difference(where, f"a string starting with {m['startsWith']!r}", value))
    if "regex" in m and not (isinstance(value, str) and re.search(m["regex"], value, re.S)):
        out.append(Difference(where, f"a string matching /{m['regex']}/", value))
    if "length" in m and not (isinstance(value, list | str | dict) and len(value) == m["length"]):
        out.append(Difference(where, f"length {m['length']}", value))
    if "oneOf" in m and not any(not diff(option, value) for option in m["oneOf"]):
        out.append(Difference(where, f"one of {_show(m['oneOf'])}", value))
    if "descendingBy" in m:
        out += _descending(where, value, m["descendingBy"])
    return out


def _descending(where: str, value: Any, key: str) -> list[Difference]:
    """An array of objects whose numeric `key` never increases (results in score order)."""
    wanted = f"an array in descending {key!r} order"
    if not isinstance(value, list):
        return [Difference(where, wanted, value)]
    raw = [item.get(key) if isinstance(item, dict) else None for item in value]
    numbers = [n for n in raw if isinstance(n, int | float) and not isinstance(n, bool)]
    if len(numbers) != len(raw):
        return [Difference(where, wanted, value, f"every item needs a numeric {key!r}")]
    for index in range(1, len(numbers)):
        if numbers[index] > numbers[index - 1]:
            return [Difference(f"{where}[{index}].{key}", wanted, numbers[index], "out of order")]
    return []
