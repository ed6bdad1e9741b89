"""How long a transport lets one call run, chosen from the facts its tool declares
(`ToolFacts.budget`), never from its name; the same rule on stdio and HTTP, in both eras.

- A plain tool has the request time limit (`--request-timeout`, 30 s).
- A tool that answers its own timeouts (LDIMS's SEARCH_TIMEOUT) gets a little more, so its own
  answer wins the race.
- A tool that waits on the client (sampling) gets the sampling time limit
  (`--sampling-timeout`, 5 minutes) for the whole call: the client's LLM may take minutes on a
  CPU (REQ-MEM-SAMPLING-001). Only in the 2025 era: in the 2026-07-28 era the server never
  waits on the client (it answers `input_required`, and the client's LLM works between two
  requests, each held to the request time limit; the plan in `requestState` stays valid for
  an hour), so the request time limit applies there.

While a call waits on the client, the server tells a client that asked for progress
(`_meta.progressToken`) that it is still waiting, every `progress_every_s`
(REQ-MEM-SAMPLING-002): often enough that a client whose own time limit is the server's
request time limit, and that restarts it on progress, keeps waiting.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.config.service import DEFAULT_REQUEST_TIMEOUT_S, DEFAULT_SAMPLING_TIMEOUT_S
from adapters.mcp.tools import CLIENT_BUDGET, OWN_BUDGET, OWN_TIMEOUT_GRACE_S, ToolFacts

__all__ = ["DEFAULT_SAMPLING_TIMEOUT_S", "Budgets"]

# the longest pause between two progress notifications while the server waits on the client
PROGRESS_EVERY_S = 5.0
MIN_PROGRESS_EVERY_S = 0.1


@dataclass(frozen=True)
class Budgets:
    """The configured time limits: `request_s` (None: no limit) and `sampling_s`."""

    request_s: float | None = DEFAULT_REQUEST_TIMEOUT_S
    sampling_s: float = DEFAULT_SAMPLING_TIMEOUT_S

    def time_limit(self, facts: ToolFacts, *, modern: bool = False) -> float | None:
        """The time limit of one call of a tool with these facts (None: no limit)."""
        if facts.budget == CLIENT_BUDGET and not modern:
            return self.sampling_s
        if self.request_s is None:
            return None
        if facts.budget == OWN_BUDGET:
            return self.request_s + OWN_TIMEOUT_GRACE_S
        return self.request_s

    @property
    def progress_every_s(self) -> float:
        """How often a call waiting on the client reports progress: at most every 5 s, and at
        least twice within the request time limit."""
        if self.request_s is None:
            return PROGRESS_EVERY_S
        return max(MIN_PROGRESS_EVERY_S, min(PROGRESS_EVERY_S, self.request_s / 2))
