"""Progress notifications for a tool call that waits on its client (REQ-MEM-SAMPLING-002).

A client that wants them puts a `progressToken` in the `_meta` of its `tools/call`; while the
call waits for the client's answer to one of our requests (`sampling/createMessage`), the
server sends `notifications/progress` with that token on the way the call came (a line on
stdout, an event on the POST's SSE stream). `progress` counts the notifications, so it grows
with each one as MCP requires; there is no `total`: how long the client's LLM takes is not
known. A client that sent no token gets none.
"""

from __future__ import annotations

import logging
from typing import Any

from adapters.mcp.outgoing import Emit

log = logging.getLogger("qmd.mcp")

PROGRESS = "notifications/progress"


def progress_token(call_params: Any) -> str | int | None:
    """The `_meta.progressToken` of a request's params (a string or an integer), if any."""
    meta = call_params.get("_meta") if isinstance(call_params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, bool) or not isinstance(token, str | int):
        return None
    return token


class WaitProgress:
    """Reports, for one call, that it is still waiting on the client."""

    def __init__(self, emit: Emit, token: str | int) -> None:
        self._emit = emit
        self._token = token
        self.sent = 0

    def __call__(self, method: str, waited_s: float) -> None:
        self.sent += 1
        params = {
            "progressToken": self._token,
            "progress": self.sent,
            "message": f"waiting for the client to answer {method} ({waited_s:.0f} s so far)",
        }
        try:
            self._emit({"jsonrpc": "2.0", "method": PROGRESS, "params": params})
        except (OSError, RuntimeError):  # the way back is gone; the wait ends on its own
            log.info("could not deliver a progress notification")
