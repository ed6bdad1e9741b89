"""Normalisation of volatile fields: assert the field is there and looks right, then replace.

Only a short, fixed list of things may vary between two runs of the same server on the same
fixture (its version string, timestamps, where the fixture was copied to, durations).
Everything else is compared exactly. A rule that finds nothing to replace is a failure,
so a server cannot pass by leaving a field out.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from conformance import jsonpath
from conformance.compare import MISSING as _MISSING

Kind = Literal["server-version", "timestamp", "fixture-root", "duration"]

PLACEHOLDERS: dict[str, str] = {
    "server-version": "${SERVER_VERSION}",
    "timestamp": "${TIMESTAMP}",
    "fixture-root": "${FIXTURE_ROOT}",
    "duration": "${DURATION}",
}

_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
# The requirements the built-in volatile fields come from (docs/spec).
INIT_REQ, ERA_REQ, STATUS_REQ = "REQ-MCP-INIT-004", "REQ-MCP-ERA-001", "REQ-TOOL-STATUS-001"
ENVELOPE_KEYS = {
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
}


# What each kind of volatile field must look like, as said to a port author.
WANTED: dict[str, str] = {
    "server-version": "a non-empty version string",
    "timestamp": "an ISO 8601 timestamp",
    "fixture-root": "a string containing the fixture root",
    "duration": "a non-negative number",
}


@dataclass(frozen=True)
class Rule:
    path: str
    kind: Kind
    why: str = ""
    requirement: str = ""  # the requirement the field comes from (builtin rules)


@dataclass(frozen=True)
class Problem:
    path: str
    message: str
    kind: str = ""
    value: Any = None  # what the server sent there (compare.MISSING when nothing)
    requirement: str = ""


def builtin_rules(
    era: str, request: dict[str, Any] | None, response: Any, meta_required: bool = True
) -> list[Rule]:
    """Rules implied by what was asked; a case may add more of its own.

    `meta_required=False`: the 2026-07-28 server-info rule applies only when the result has a
    `_meta` (a step that switches era mid-connection; its golden decides the rest).
    """
    if not isinstance(response, dict) or "result" not in response:
        return []
    rules: list[Rule] = []
    method = request.get("method") if request else None
    if method == "initialize":
        rules.append(
            Rule("$.result.serverInfo.version", "server-version", "release string", INIT_REQ)
        )
    has_meta = isinstance(response["result"], dict) and "_meta" in response["result"]
    if era == "2026-07-28" and _has_envelope(request) and (meta_required or has_meta):
        rules.append(
            Rule(
                f'$.result._meta["{SERVER_INFO_META}"].version',
                "server-version",
                "every 2026-07-28 result names the server",
                ERA_REQ,
            )
        )
    params = request.get("params") if request else None
    result = response["result"]
    if (
        method == "tools/call"
        and isinstance(params, dict)
        and params.get("name") == "status"
        and isinstance(result, dict)
        and not result.get("isError")
    ):
        where = "$.result.structuredContent.collections[*]"
        rules += [
            Rule(f"{where}.lastUpdated", "timestamp", "mtime", STATUS_REQ),
            Rule(f"{where}.path", "fixture-root", "scratch dir", STATUS_REQ),
            Rule("$.result.content[0].text", "fixture-root", "status names paths", STATUS_REQ),
        ]
    return rules


def _has_envelope(request: dict[str, Any] | None) -> bool:
    # Only a request that carried the 2026-07-28 envelope gets a modern result; the original
    # answers envelope-less requests the 2025 way even after server/discover.
    params = request.get("params") if request else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and set(meta) >= ENVELOPE_KEYS


def normalize(
    message: Any, rules: Iterable[Rule], fixture_roots: Iterable[str]
) -> tuple[Any, list[Problem]]:
    """Return a normalised deep copy of message and the assertions that failed."""
    out = copy.deepcopy(message)
    problems: list[Problem] = []
    roots = sorted({r for r in fixture_roots if r}, key=len, reverse=True)
    for rule in rules:
        nodes = list(jsonpath.find(out, rule.path))
        if not nodes:
            problems.append(
                Problem(
                    rule.path,
                    f"missing: the answer has no {rule.path} ({WANTED[rule.kind]})",
                    rule.kind,
                    _MISSING,
                    rule.requirement,
                )
            )
            continue
        for where, value in nodes:
            fixed, why_not = _replace(rule.kind, value, roots)
            if why_not:
                problems.append(Problem(where, why_not, rule.kind, value, rule.requirement))
            else:
                jsonpath.set_value(out, where, fixed)
    return out, problems


def _replace(kind: Kind, value: Any, roots: list[str]) -> tuple[Any, str | None]:
    if kind == "server-version":
        if isinstance(value, str) and value.strip():
            return PLACEHOLDERS[kind], None
        return value, f"expected a non-empty version string, got {value!r}"
    if kind == "timestamp":
        if isinstance(value, str) and _ISO.match(value):
            return PLACEHOLDERS[kind], None
        return value, f"expected an ISO 8601 timestamp, got {value!r}"
    if kind == "duration":
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return PLACEHOLDERS[kind], None
        return value, f"expected a non-negative duration, got {value!r}"
    # fixture-root: the absolute scratch path must appear, and only it is rewritten.
    if not isinstance(value, str):
        return value, f"expected a string containing the fixture root, got {value!r}"
    hit = next((r for r in roots if r in value), None)
    if hit is None:
        return value, f"expected the fixture root {roots[:1]} in {value!r}"
    text = value
    for root in roots:
        text = text.replace(root, PLACEHOLDERS[kind])
    return text, None
