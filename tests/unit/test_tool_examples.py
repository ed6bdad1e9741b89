"""A tool is tested from its declaration: each declared tool carries example arguments
(`Tool.example`) that the process-level tests send over every transport, and the capabilities
a transport serves or refuses (subscriptions, shutdown) are declared facts of the surface,
read from `SurfaceFacts`, never probed on the surface object; `call_tool` takes the call's
context. Generated from the surface registry: a new tool is covered by declaring it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from adapters.mcp.protocol import Session
from adapters.mcp.registry import surface_facts
from adapters.mcp.tools import BaseSurface, CallContext, ToolResult, tool, validate_arguments
from tests.guarantees import Rig, served_surfaces, tool_examples, tool_names

REPO = Path(__file__).resolve().parents[2]
EVERY_TOOL = [(surface, name) for surface in served_surfaces() for name in tool_names(surface)]
# The modules that serve any surface: they read its facts, never probe it.
SERVING_FILES = sorted(
    [
        *(REPO / "adapters" / "http").glob("*.py"),
        *(
            REPO / "adapters" / "mcp" / f"{name}.py"
            for name in ("protocol", "dispatch", "workers", "stdio", "subscriptions", "server")
        ),
    ]
)
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
}


@pytest.mark.parametrize("surface", served_surfaces())
def test_the_examples_are_the_listed_tools_in_order(surface: str) -> None:
    assert tool_names(surface) == [listed["name"] for listed in Rig(surface).tools()]


@pytest.mark.parametrize(("surface", "name"), EVERY_TOOL)
def test_every_tool_declares_an_example_its_schema_accepts(surface: str, name: str) -> None:
    listed = next(t for t in Rig(surface).tools() if t["name"] == name)
    example = tool_examples(surface)[name]
    assert validate_arguments(listed["inputSchema"], example) == [], (surface, name, example)


def test_an_example_is_never_on_the_wire() -> None:
    reply = (
        Rig("spec").session().handle_message({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    )
    assert reply is not None
    assert all("example" not in listed for listed in reply["result"]["tools"])


# -- capabilities are declared facts ------------------------------------------------------------


class _Echo(BaseSurface):
    """One tool that answers with the era and the capabilities its call context carries."""

    name = "echo"
    templates = ({"uriTemplate": "echo://{x}", "name": "echo"},)

    def __init__(self) -> None:
        super().__init__("1.0")
        self.contexts: list[CallContext] = []

    def call_tool(self, name: str, arguments: Any, context: CallContext) -> ToolResult:
        self.contexts.append(context)
        return super().call_tool(name, arguments, context)

    @tool("echo", "Echoes.", schema={"type": "object"}, example={})
    def _echo(self, _args: dict[str, Any]) -> ToolResult:
        return {"content": [{"type": "text", "text": "echo"}]}


class _WatchesButSaysNot(_Echo):
    """Keeps watchers but does not declare itself subscribable: nothing offers subscriptions."""

    def subscribe(self, uri: str, notify: Any) -> None:
        raise AssertionError("a transport probed the surface instead of reading its facts")


class _Watched(_Echo):
    subscribable = True

    def __init__(self) -> None:
        super().__init__()
        self.watched: list[str] = []

    def subscribe(self, uri: str, notify: Any) -> None:
        self.watched.append(uri)

    def unsubscribe(self, uri: str) -> None:
        self.watched.remove(uri)


def _initialized(surface: BaseSurface) -> Session:
    session = Session(surface)
    session.emit = lambda _message: None  # a connection with a stream of its own (stdio)
    session.handle_message({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    return session


def _ask(session: Session, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 9, "method": method}
    if params is not None:
        message["params"] = params
    reply = session.handle_message(message)
    assert reply is not None
    return reply


def test_subscriptions_are_served_where_declared_and_only_there() -> None:
    """On the old code the Session and the capabilities probed for a `subscribe` method."""
    assert _Watched.facts.subscribable and not _WatchesButSaysNot.facts.subscribable
    probed = _initialized(_WatchesButSaysNot())
    hello = _ask(probed, "initialize", {"protocolVersion": "2025-06-18"})["result"]
    assert "subscribe" not in hello["capabilities"]["resources"]
    refused = _ask(probed, "resources/subscribe", {"uri": "echo://a"})
    assert refused["error"]["code"] == -32601
    surface = _Watched()
    watched = _initialized(surface)
    hello = _ask(watched, "initialize", {"protocolVersion": "2025-06-18"})["result"]
    assert hello["capabilities"]["resources"]["subscribe"] is True
    assert _ask(watched, "resources/subscribe", {"uri": "echo://a"})["result"] == {}
    assert surface.watched == ["echo://a"]


def test_a_surface_declared_subscribable_must_keep_watchers() -> None:
    with pytest.raises(TypeError, match="subscribable"):

        class _Claims(_Echo):
            subscribable = True


def test_shutdown_is_answered_where_declared() -> None:
    class _Ends(_Echo):
        answers_shutdown = True

    assert _Ends.facts.answers_shutdown and not _Echo.facts.answers_shutdown
    assert _ask(_initialized(_Ends()), "shutdown")["result"] == {}
    assert _ask(_initialized(_Echo()), "shutdown")["error"]["code"] == -32601
    assert surface_facts("spec").answers_shutdown  # seed 001 (REQ-SPEC-SHUTDOWN-001)


def test_call_tool_is_handed_the_call_context_in_both_eras() -> None:
    """Every surface's `call_tool` gets the call's context (on the old code only a surface
    with a `call_tool_with` method did, found by probing for it)."""
    surface = _Echo()
    legacy = _initialized(surface)
    called = _ask(legacy, "tools/call", {"name": "echo", "arguments": {}})
    assert called["result"]["content"][0]["text"] == "echo"
    modern = Session(surface)
    params = {"name": "echo", "arguments": {}, "_meta": MODERN_META}
    assert "result" in _ask(modern, "tools/call", params)
    assert [c.era for c in surface.contexts] == ["legacy", "modern"]
    assert surface.contexts[1].client_capabilities == {"sampling": {}}


def _probes(path: Path) -> list[str]:
    """`getattr`/`hasattr` calls on something named like a surface."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id in ("getattr", "hasattr") and node.args:
            target = ast.unparse(node.args[0])
            if "surface" in target or "front" in target:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_serving_module_probes_a_surface() -> None:
    assert [hit for path in SERVING_FILES for hit in _probes(path)] == []


def test_the_probe_scan_sees_a_probe(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('def f(self):\n    return getattr(self.surface, "subscribe", None)\n')
    assert len(_probes(sample)) == 1
