"""Which protocol era one connection speaks (REQ-MCP-ERA-002, REQ-MCP-ERA-006).

The original's stdio entry (`serveStdio` of @modelcontextprotocol/server 2.0.0) decides the
era once per connection, from its opening messages, and then keeps it:

* a message without an envelope claim (or `initialize` without a valid 2026-07-28 envelope)
  makes the connection 2025-era: later envelopes are ignored, never validated;
* `server/discover` with a valid envelope is answered in 2026-07-28 but is only a probe: more
  discovers stay undecided, and a message without a claim still makes it 2025-era;
* any other message with a valid envelope makes the connection 2026-07-28-era: from then on a
  request needs the envelope, and `initialize` is refused with -32022;
* an envelope error while undecided (bad envelope, unknown revision) decides nothing.

This module holds only that state machine; `protocol.Session` turns its verdicts into replies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.mcp.validation import js_type

MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
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

INVALID_PARAMS = -32602
UNSUPPORTED_VERSION = -32022

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
