"""The skeleton every surface's `tools/call` shares: validate the arguments against the tool's
input schema, fill in schema defaults, run the handler, and present failures in the
surface's own words (an error presenter). A surface is then a tool table plus a presenter."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from adapters.mcp.validation import validate_arguments, with_defaults
from domain.errors import DocumentNotFoundError, QmdError

log = logging.getLogger("qmd.mcp")

ToolResult = dict[str, Any]
ToolHandler = Callable[[dict[str, Any]], ToolResult]


# A tool's time budget (`ToolFacts.budget`):
REQUEST_BUDGET = "request"  # the transport's request time limit
OWN_BUDGET = "own"  # the tool answers its own time limit; the transport's comes a little later
CLIENT_BUDGET = "client"  # waits on the client: the sampling time limit (adapters/mcp/budgets.py)
# How much longer the transport waits for a tool that answers its own timeouts (LDIMS's
# SEARCH_TIMEOUT, given at the configured time exactly) before it answers with its generic
# timeout error instead: only enough for the tool's own answer to win the race.
OWN_TIMEOUT_GRACE_S = 0.5


def hybrid_query_runs_model(arguments: Any) -> bool:
    """A hybrid query reaches a model unless it is lexical sub-queries only with reranking
    off (then it is BM25 and fast). Unreadable arguments count as reaching one."""
    if not isinstance(arguments, dict):
        return True
    searches = arguments.get("searches")
    if arguments.get("query") or not isinstance(searches, list) or not searches:
        return True
    lexical = all(isinstance(s, dict) and s.get("type") == "lex" for s in searches)
    return not (lexical and arguments.get("rerank") is False)


@dataclass(frozen=True)
class ToolFacts:
    """What a transport must know of a tool before it runs it, declared by the surface where
    it registers the tool; transports read these and never a tool's name.

    `runs_model`: the call may run a model (True, or a test of the raw arguments), so it goes
    to the bounded model lane. `writes`: it changes stored state, so a cancel that comes
    after it committed is refused. `waits_on_client`: it sends the client requests while it
    runs (sampling), so the 2025-era HTTP transport streams its answer. `budget`: how long the
    transport lets it run (REQUEST_BUDGET, OWN_BUDGET or CLIENT_BUDGET; adapters/mcp/budgets.py)."""

    runs_model: bool | Callable[[Any], bool] = False
    writes: bool = False
    waits_on_client: bool = False
    budget: str = REQUEST_BUDGET

    def may_run_model(self, arguments: Any) -> bool:
        rule = self.runs_model
        return rule(arguments) if callable(rule) else rule


PLAIN_TOOL = ToolFacts()


@dataclass(frozen=True)
class SurfaceFacts:
    """What transports and the CLI must know of a surface, declared beside its tool table:
    each tool's facts, and `original` (the release of the original QMD it answers as, None
    for this project's own surfaces: its REST route and models then follow the original's
    rules)."""

    tools: Mapping[str, ToolFacts]
    original: str | None = None
    # the surface's service is configured by a `.env` in the working folder when no
    # `--env-file` names another (seed 003 §7.1)
    reads_working_env_file: bool = False

    def tool(self, name: Any) -> ToolFacts:
        return self.tools.get(name, PLAIN_TOOL) if isinstance(name, str) else PLAIN_TOOL

    @property
    def talks_back(self) -> bool:
        return any(facts.waits_on_client for facts in self.tools.values())


NO_FACTS = SurfaceFacts({})


@dataclass(frozen=True)
class Tool:
    """One tool: its `tools/list` entry (name, description, inputSchema, …) and its handler,
    which receives the validated arguments with schema defaults filled in."""

    definition: Mapping[str, Any]
    handler: ToolHandler

    @property
    def name(self) -> str:
        return str(self.definition["name"])


class ToolErrorPresenter(Protocol):
    """How one surface answers a tool call that failed."""

    def invalid_arguments(self, tool: str, issues: list[str]) -> ToolResult: ...
    def not_found(self, error: DocumentNotFoundError) -> ToolResult: ...
    def failed(self, error: QmdError) -> ToolResult: ...
    def crashed(self, tool: str, error: Exception) -> ToolResult: ...


def tool_table(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


def call_tool(
    tools: Mapping[str, Tool], presenter: ToolErrorPresenter, name: str, arguments: Any
) -> ToolResult:
    """Run tool `name` (the session has checked that it exists)."""
    tool = tools[name]
    schema = tool.definition["inputSchema"]
    issues = validate_arguments(schema, arguments)
    if issues:
        return presenter.invalid_arguments(name, issues)
    try:
        return tool.handler(with_defaults(schema, arguments))
    except DocumentNotFoundError as error:
        return presenter.not_found(error)
    except QmdError as error:
        return presenter.failed(error)
    except Exception as error:  # seed 001: one failing call must not end the server
        log.exception("tool %s failed", name)
        return presenter.crashed(name, error)


def input_validation_message(tool: str, issues: list[str]) -> str:
    return f"Input validation error: Invalid arguments for tool {tool}: {', '.join(issues)}"
