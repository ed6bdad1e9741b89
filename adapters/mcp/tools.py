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
