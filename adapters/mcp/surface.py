"""What every MCP surface shares, so that a surface module holds only what is its own: its
tools (declared with `@tool` on their handlers, adapters/mcp/tools.py), its error presenter,
instructions, resources and prompts. `BaseSurface` collects the declared tools into the
`tools/list` answer, the `tools/call` dispatch and the `SurfaceFacts` the registry, the
transports and the CLI read, its declared capabilities (`answers_shutdown`, `subscribable`,
`failures_as_data`) among them.

A surface is then a `BaseSurface` subclass plus one `register_surface` line in
adapters/mcp/registry.py; the Session (adapters/mcp/protocol.py) serves it unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

from adapters.mcp.formatting import not_found_text, text_result
from adapters.mcp.tools import (
    CallContext,
    SurfaceFacts,
    Tool,
    ToolErrorPresenter,
    ToolResult,
    input_validation_message,
    run_tool,
)
from adapters.mcp.wording import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    JsonRpcError,
    JsonRpcWording,
    ProtocolWording,
)
from domain.errors import (
    INTERNAL_ERROR,
    INVALID_ARGUMENT,
    NOT_FOUND,
    DocumentNotFoundError,
    QmdError,
    error_envelope,
)


def error_result(code: str, message: str) -> ToolResult:
    """Seed 001: a tool failure is data: readable text plus the stable envelope."""
    result = text_result(message, is_error=True)
    result["structuredContent"] = error_envelope(code, message)
    return result


def resource_failure(uri: str, code: str, message: str) -> dict[str, Any]:
    """Seed 001: a resource failure is data too: the envelope as an `application/json`
    resource under the requested URI."""
    envelope = json.dumps(error_envelope(code, message))
    return {"contents": [{"uri": uri, "mimeType": "application/json", "text": envelope}]}


def unknown_tool(name: str, known: list[str]) -> ToolResult:
    """Seed 001's answer to a call of a tool the surface does not list: an isError result,
    naming the tools there are so that an agent can correct itself."""
    return error_result(NOT_FOUND, f"Tool {name} not found (tools: {', '.join(known)})")


def template_prefix(template: dict[str, Any]) -> str:
    """The literal start every URI of an RFC 6570 template shares (`qmd://` of
    `qmd://{+path}`)."""
    return str(template["uriTemplate"]).split("{", 1)[0]


def outside_templates(uri: str, templates: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Seed 001's answer to a URI that no resource template of the surface holds (None when
    one does): a resource holding the `not-found` envelope, naming the templates."""
    if any(uri.startswith(template_prefix(t)) for t in templates):
        return None
    served = ", ".join(str(t["uriTemplate"]) for t in templates) or "none"
    return resource_failure(uri, NOT_FOUND, f"Resource not found: {uri} (resources: {served})")


class EnvelopeErrors:
    """This project's error presenter: every failure carries the seed-001 envelope."""

    def invalid_arguments(self, tool: str, issues: list[str]) -> ToolResult:
        return error_result(INVALID_ARGUMENT, input_validation_message(tool, issues))

    def not_found(self, error: DocumentNotFoundError) -> ToolResult:
        return error_result(error.code, not_found_text(error))

    def failed(self, error: QmdError) -> ToolResult:
        return error_result(error.code, error.message)

    def crashed(self, tool: str, error: Exception) -> ToolResult:
        return error_result(
            INTERNAL_ERROR, f"Internal error while running {tool}: {type(error).__name__}"
        )


class BaseSurface:
    """The protocol side of a surface. A subclass sets `name`, declares its tools and sets
    `server_version` (by `super().__init__`); the class attributes below are the defaults of
    this project's own surfaces."""

    name: str
    # the original QMD release the surface answers as (None: this project's own surface)
    original: ClassVar[str | None] = None
    # its service reads `.env` in the working folder when no `--env-file` names another
    reads_working_env_file: ClassVar[bool] = False
    # an unknown tool or resource URI is answered as data (seed 001), not -32602
    failures_as_data: ClassVar[bool] = False
    answers_malformed_messages: bool = True
    answers_shutdown: ClassVar[bool] = False  # seed 001's `shutdown` (REQ-SPEC-SHUTDOWN-001)
    # its resources can be watched: the subclass keeps watchers (`subscribe`, `unsubscribe`)
    subscribable: ClassVar[bool] = False
    wording: ProtocolWording = JsonRpcWording()
    errors: ClassVar[ToolErrorPresenter] = EnvelopeErrors()
    list_changed: ClassVar[bool] = False  # the capabilities' `listChanged`
    instructions_text: ClassVar[str | None] = None
    templates: ClassVar[tuple[dict[str, Any], ...]] = ()  # resources/templates/list

    # Collected from the declared tools when the class is made (__init_subclass__).
    declared_tools: ClassVar[tuple[Tool, ...]] = ()
    facts: SurfaceFacts = SurfaceFacts({})
    _listing: ClassVar[list[dict[str, Any]]] = []
    _by_name: ClassVar[dict[str, Tool]] = {}

    def __init__(self, server_version: str) -> None:
        self.server_version = server_version

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        by_attribute: dict[str, Tool] = {}  # a subclass's declaration replaces its base's
        for klass in reversed(cls.__mro__):
            for attribute, value in vars(klass).items():
                if isinstance(value, Tool):
                    by_attribute[attribute] = value
        declared = tuple(by_attribute.values())
        names = [t.name for t in declared]
        if len(set(names)) != len(names):
            raise TypeError(f"{cls.__name__} declares a tool name twice: {names}")
        overrides = cls.subscribe is not BaseSurface.subscribe
        if cls.subscribable and not overrides:
            raise TypeError(f"{cls.__name__} is subscribable but keeps no watchers (subscribe)")
        cls.declared_tools = declared
        cls._by_name = {t.name: t for t in declared}
        cls._listing = [t.definition() for t in declared]
        cls.facts = SurfaceFacts(
            {t.name: t.facts for t in declared},
            original=cls.original,
            reads_working_env_file=cls.reads_working_env_file,
            failures_as_data=cls.failures_as_data,
            answers_shutdown=cls.answers_shutdown,
            subscribable=cls.subscribable,
            examples={t.name: t.example for t in declared},
            paths={t.name: t.paths for t in declared if t.paths},
        )

    # -- tools --------------------------------------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        return self._listing

    def call_tool(self, name: str, arguments: Any, context: CallContext) -> ToolResult:
        """Run tool `name` (the session has checked that the surface lists it) for the client
        `context` describes (`NO_CLIENT` in process). A surface whose tools talk back to the
        client reads the context; the others need not."""
        return run_tool(self._by_name[name], self, self.errors, arguments)

    # -- what the surface says of itself ------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        """Prompts when it has some, resources when it has templates (subscribable when it
        can be watched), and tools."""
        listed = {"listChanged": self.list_changed}
        declared: dict[str, Any] = {}
        if self.prompts() is not None:
            declared["prompts"] = dict(listed)
        if self.templates:
            watched = {"subscribe": True} if self.facts.subscribable else {}
            declared["resources"] = {**watched, **listed}
        declared["tools"] = dict(listed)
        return declared

    def instructions(self) -> str | None:
        return self.instructions_text

    def prompts(self) -> list[dict[str, Any]] | None:
        return None

    def get_prompt(self, name: str, arguments: Any) -> dict[str, Any]:
        raise JsonRpcError(INVALID_PARAMS, f"Prompt {name} not found")

    def resource_templates(self) -> list[dict[str, Any]]:
        return list(self.templates)

    def read_resource(self, uri: str) -> dict[str, Any]:
        raise JsonRpcError(INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})

    # -- watched resources (a `subscribable` surface overrides both) -------------------------

    def subscribe(self, uri: str, notify: Callable[[str, dict[str, Any]], None]) -> None:
        """Watch `uri`: `notify(method, params)` on each change, until `unsubscribe(uri)`."""
        raise JsonRpcError(METHOD_NOT_FOUND, "Method not found")

    def unsubscribe(self, uri: str) -> None:
        raise JsonRpcError(METHOD_NOT_FOUND, "Method not found")
