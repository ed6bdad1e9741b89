"""What every MCP surface is built from, so that a surface module holds only what is its own:
its tools, its error presenter, instructions, resources and prompts.

A tool is declared once: its `tools/list` entry, its handler and the facts the transports
read, side by side in one `Tool` value. A surface (a `BaseSurface` subclass) declares each
tool with `@tool` on its handler; `tools/list` lists them in that order:

    class NotesSurface(BaseSurface):
        @tool("count_notes", "How many notes the index holds.", title="Count Notes",
              schema={"type": "object", "properties": {}, "additionalProperties": False},
              example={},  # a call the tests make over every transport (see `Tool.example`)
              annotations=READ_ONLY)  # facts: PLAIN_TOOL unless given (ToolFacts(...))
        def _count(self, args: dict[str, Any]) -> ToolResult:  # arguments checked, defaulted
            n = sum(c.documents for c in self._services.store.collection_counts())
            return {"content": [{"type": "text", "text": f"{n} notes"}],
                    "structuredContent": {"count": n}}

A recorded definition (the compat surface's JSON) becomes the same `Tool` by `@recorded`.
`run_tool` is the skeleton every `tools/call` shares: validate the arguments against the input
schema, fill in schema defaults, run the handler, and present failures in the surface's own
words (an error presenter). `CallContext` is what one call knows of its client; the Session
hands it to `call_tool`.

**The surface.** `BaseSurface` collects the declared tools into the `tools/list` answer, the
`tools/call` dispatch and the `SurfaceFacts` the registry, the transports and the CLI read, its
declared capabilities (`answers_shutdown`, `subscribable`, `failures_as_data`) among them. A
surface is then a `BaseSurface` subclass plus one `register_surface` line in
adapters/mcp/registry.py; the Session (adapters/mcp/protocol.py) serves it unchanged.

**Arguments** are checked against the tool's JSON Schema (`validate_arguments`), the issues
worded the way the original's schema library words them (so the compat surface answers
byte-for-byte), e.g. `file: Invalid input: expected string, received number`. Unknown
properties are ignored, as there, unless the schema is closed (`additionalProperties: false`,
the surfaces other than compat): then each one is an issue naming it (REQ-SPEC-ARGS-001).

**Time budgets** (`Budgets`): how long a transport lets one call run, chosen from the facts its
tool declares (`ToolFacts.budget`), never from its name; the same rule on stdio and HTTP, in
both eras:

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

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from adapters.config.service import DEFAULT_REQUEST_TIMEOUT_S, DEFAULT_SAMPLING_TIMEOUT_S
from adapters.mcp.formatting import not_found_text, text_result
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
from domain.ports import WorkCancelledError

log = logging.getLogger("qmd.mcp")

ToolResult = dict[str, Any]


# A tool's time budget (`ToolFacts.budget`):
REQUEST_BUDGET = "request"  # the transport's request time limit
OWN_BUDGET = "own"  # the tool answers its own time limit; the transport's comes a little later
CLIENT_BUDGET = "client"  # waits on the client: the sampling time limit (`Budgets`)
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


# sends the client a request (method, params) and waits for its result
Ask = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class CallContext:
    """What a tool call may know of its client and ask of it (docs/decisions/0039).

    `era` is "legacy" (2025 revisions) or "modern" (2026-07-28). `client_capabilities` is what
    the client declared (initialize in the 2025 era, `_meta` of the request in 2026-07-28), None
    where the transport cannot know (stateless 2025-era HTTP, where initialize came on another
    POST). `ask` sends a server-to-client request and waits for its result (2025 era; None where
    the transport has no way back to the client). `input_responses`/`request_state` carry a
    2026-07-28 retry of an `input_required` result."""

    era: str
    client_capabilities: dict[str, Any] | None
    ask: Ask | None = None
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None
    # a tool that writes calls this just before it writes: False means the call was cancelled
    # (write nothing); after True a cancel is refused. None where nothing can cancel the call.
    commit: Callable[[], bool] | None = None


# A call with no client behind it (a surface used in process, as the LDIMS backend over this
# index uses its own search): nothing to ask, nothing that can cancel it.
NO_CLIENT = CallContext("legacy", None)


@dataclass(frozen=True)
class ToolFacts:
    """What a transport must know of a tool before it runs it, declared with the tool
    (`Tool.facts`); transports read these and never a tool's name.

    `runs_model`: the call may run a model (True, or a test of the raw arguments), so it goes
    to the bounded model lane. `writes`: it changes stored state, so a cancel that comes
    after it committed is refused. `waits_on_client`: it sends the client requests while it
    runs (sampling), so the 2025-era HTTP transport streams its answer, and its model-lane
    slot is lent to other calls while it waits (REQ-MCP-LANE-001). `budget`: how long the
    transport lets it run (REQUEST_BUDGET, OWN_BUDGET or CLIENT_BUDGET; `Budgets`)."""

    runs_model: bool | Callable[[Any], bool] = False
    writes: bool = False
    waits_on_client: bool = False
    budget: str = REQUEST_BUDGET

    def may_run_model(self, arguments: Any) -> bool:
        rule = self.runs_model
        return rule(arguments) if callable(rule) else rule


PLAIN_TOOL = ToolFacts()


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


@dataclass(frozen=True)
class SurfaceFacts:
    """What transports and the CLI must know of a surface, collected from its declared tools
    and class attributes (`BaseSurface.facts`): each tool's facts, and `original` (the release
    of the original QMD it answers as, None for this project's own surfaces: its REST route
    and models then follow the original's rules). The capabilities a transport serves or
    refuses (shutdown, subscriptions, talking back) are read here, never probed on the
    surface object."""

    tools: Mapping[str, ToolFacts]
    original: str | None = None
    # the surface's service is configured by a `.env` in the working folder when no
    # `--env-file` names another (seed 003 §7.1)
    reads_working_env_file: bool = False
    # seed 001: an unknown tool name and a resource URI outside the surface's templates are
    # failures as data (an isError tool result, a resource holding the error envelope), not
    # JSON-RPC errors; False keeps -32602 (the original's answer)
    failures_as_data: bool = False
    # seed 001's `shutdown` request is answered (REQ-SPEC-SHUTDOWN-001); the original has none
    answers_shutdown: bool = False
    # its resources can be watched (`resources/subscribe`): the surface keeps one watcher per
    # URI (`subscribe`, `unsubscribe`), and a transport with a stream serves the method
    subscribable: bool = False
    # each tool's example arguments (`Tool.example`), in declaration order: what the tests
    # that list and call every tool read; no transport reads it
    examples: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # the arguments of each tool that name a file or a document (`Tool.paths`): what the
    # scope guarantee tests aim outside the root (tests/unit/test_scope_guarantee.py)
    paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def tool(self, name: Any) -> ToolFacts:
        return self.tools.get(name, PLAIN_TOOL) if isinstance(name, str) else PLAIN_TOOL

    @property
    def talks_back(self) -> bool:
        return any(facts.waits_on_client for facts in self.tools.values())


NO_FACTS = SurfaceFacts({})


# -- arguments: checked against the input schema (REQ-SPEC-ARGS-001) ------------------------


def js_type(value: Any) -> str:
    """The name JavaScript-side validators give a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


_MISSING = object()


def _check(schema: dict[str, Any], value: Any, path: list[str], issues: list[str]) -> None:
    where = ".".join(path)
    expected = schema.get("type")
    got = "undefined" if value is _MISSING else js_type(value)
    if "enum" in schema:
        if value is _MISSING or value not in schema["enum"] or got != expected:
            options = "|".join(f'"{option}"' for option in schema["enum"])
            issues.append(f"{where}: Invalid option: expected one of {options}")
        return
    if expected is not None and got != expected:
        issues.append(f"{where}: Invalid input: expected {expected}, received {got}")
        return
    if isinstance(value, float) and not math.isfinite(value):
        # 1e999 decodes to infinity; the original's validator refuses it in these words.
        issues.append(f"{where}: Invalid input: expected number, received number")
        return
    if expected == "array":
        max_items = schema.get("maxItems")
        if max_items is not None and len(value) > max_items:
            issues.append(f"{where}: Too big: expected array to have <={max_items} items")
            return
        item_schema = schema.get("items")
        if item_schema:
            for index, item in enumerate(value):
                _check(item_schema, item, [*path, str(index)], issues)
    elif expected == "object":
        _check_object(schema, value, path, issues)


def _check_object(
    schema: dict[str, Any], value: dict[str, Any], path: list[str], issues: list[str]
) -> None:
    required = set(schema.get("required", []))
    properties: dict[str, Any] = schema.get("properties", {})
    for name, prop in properties.items():
        if name in value:
            _check(prop, value[name], [*path, name], issues)
        elif name in required:
            _check(prop, _MISSING, [*path, name], issues)
    if schema.get("additionalProperties") is False:
        # an agent that misspells an argument must learn it, not believe it was applied
        known = ", ".join(properties) or "none"
        for name in value:
            if name not in properties:
                where = ".".join([*path, name])
                issues.append(f"{where}: Unknown argument (known: {known})")


def validate_arguments(schema: dict[str, Any], arguments: Any) -> list[str]:
    """Return the issues (empty when valid); `arguments` absent is treated as `{}`."""
    issues: list[str] = []
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return [f": Invalid input: expected object, received {js_type(arguments)}"]
    _check_object(schema, arguments, [], issues)
    return issues


def with_defaults(schema: dict[str, Any], arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Fill schema defaults for absent properties; drop properties the schema doesn't name."""
    given = arguments or {}
    result: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if name in given:
            result[name] = given[name]
        elif "default" in prop:
            result[name] = prop["default"]
    return result


def optional_int(value: Any) -> int | None:
    """A validated numeric argument as an integer (truncated, like JavaScript), or None."""
    return None if value is None else int(value)


# A handler: the surface it belongs to, and the validated arguments with defaults filled in.
ToolHandler = Callable[[Any, dict[str, Any]], ToolResult]
# The hint the read-only tools of this project's own surfaces give (MCP tool annotations).
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}


@dataclass(frozen=True)
class Tool:
    """One tool: what `tools/list` shows of it, its handler and its facts.

    `example` is one set of arguments the tool answers over the test corpus (fixtures/, the
    index `tests/mcp_harness.py` builds) without a model: the tests that list and call every
    tool over each transport (tests/e2e) read it from here, so a new tool needs no test entry.
    It is never shown on the wire.

    `paths` names the arguments that say which file or document to read (a path, a `qmd://`
    URI, a docid, a glob): a tool that has them reads through the surface's scope policy (the
    `ScopePolicy` its `SurfaceContext` carries, and the services scoped by the same policy),
    and the scope guarantee test aims each of them outside the root on every surface."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    facts: ToolFacts = PLAIN_TOOL
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    example: Mapping[str, Any] = field(default_factory=dict)
    paths: tuple[str, ...] = ()

    def definition(self) -> dict[str, Any]:
        """The `tools/list` entry, its fields in the order MCP's own servers write them."""
        entry: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            entry["title"] = self.title
        entry["description"] = self.description
        entry["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            entry["outputSchema"] = self.output_schema
        if self.annotations is not None:
            entry["annotations"] = self.annotations
        return entry

    @classmethod
    def from_definition(
        cls,
        definition: Mapping[str, Any],
        handler: ToolHandler,
        facts: ToolFacts = PLAIN_TOOL,
        example: Mapping[str, Any] | None = None,
        paths: tuple[str, ...] = (),
    ) -> Tool:
        """A recorded `tools/list` entry as a Tool; refused unless the Tool lists it back
        exactly, field order included (a recorded wire contract must not change)."""
        declared = cls(
            name=definition["name"],
            description=definition["description"],
            input_schema=definition["inputSchema"],
            handler=handler,
            facts=facts,
            title=definition.get("title"),
            output_schema=definition.get("outputSchema"),
            annotations=definition.get("annotations"),
            example=example or {},
            paths=paths,
        )
        listed = declared.definition()
        if list(listed.items()) != list(definition.items()):
            raise ValueError(f"recorded tool {declared.name!r} does not list back as recorded")
        return declared


def tool(
    name: str,
    description: str,
    *,
    schema: dict[str, Any],
    example: Mapping[str, Any],
    facts: ToolFacts = PLAIN_TOOL,
    title: str | None = None,
    output_schema: dict[str, Any] | None = None,
    annotations: Mapping[str, Any] | None = None,
    paths: tuple[str, ...] = (),
) -> Callable[[ToolHandler], Tool]:
    """Declare the decorated surface method as tool `name` (see the module docstring)."""

    def declare(handler: ToolHandler) -> Tool:
        return Tool(
            name,
            description,
            schema,
            handler,
            facts,
            title,
            output_schema,
            annotations,
            example,
            paths,
        )

    return declare


def recorded(
    definition: Mapping[str, Any],
    *,
    example: Mapping[str, Any],
    facts: ToolFacts = PLAIN_TOOL,
    paths: tuple[str, ...] = (),
) -> Callable[[ToolHandler], Tool]:
    """Declare the decorated surface method as the recorded tool `definition`."""
    return lambda handler: Tool.from_definition(definition, handler, facts, example, paths)


class ToolErrorPresenter(Protocol):
    """How one surface answers a tool call that failed."""

    def invalid_arguments(self, tool: str, issues: list[str]) -> ToolResult: ...
    def not_found(self, error: DocumentNotFoundError) -> ToolResult: ...
    def failed(self, error: QmdError) -> ToolResult: ...
    def crashed(self, tool: str, error: Exception) -> ToolResult: ...


def run_tool(
    declared: Tool, surface: Any, presenter: ToolErrorPresenter, arguments: Any
) -> ToolResult:
    """Run `declared`, a tool of `surface`, on the raw `arguments` of a `tools/call`."""
    schema = declared.input_schema
    issues = validate_arguments(schema, arguments)
    if issues:
        return presenter.invalid_arguments(declared.name, issues)
    try:
        return declared.handler(surface, with_defaults(schema, arguments))
    except DocumentNotFoundError as error:
        return presenter.not_found(error)
    except QmdError as error:
        return presenter.failed(error)
    except WorkCancelledError as error:  # given up: nobody reads this answer, no stack to log
        log.info("tool %s stopped: its request was given up", declared.name)
        return presenter.crashed(declared.name, error)
    except Exception as error:  # seed 001: one failing call must not end the server
        log.exception("tool %s failed", declared.name)
        return presenter.crashed(declared.name, error)


def input_validation_message(tool: str, issues: list[str]) -> str:
    return f"Input validation error: Invalid arguments for tool {tool}: {', '.join(issues)}"


# -- the surface: failures as data, and the base class that serves the declared tools ---------


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
