"""A tool is declared once (adapters/mcp/tools.py): schema, handler and facts in one `Tool`,
collected by `BaseSurface`. Generated from the surface registry: a new surface, or a new tool,
is covered by registering it."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from adapters.mcp.compat import CompatSurface
from adapters.mcp.registry import surface_facts
from adapters.mcp.tools import BaseSurface, Tool, tool
from tests.guarantees import Rig, sample_arguments, served_surfaces

# this project's own surfaces; the compat surface ignores unknown arguments as the original
# does (REQ-TOOL-CALL-004)
OWN_SURFACES = [name for name in served_surfaces() if surface_facts(name).original is None]
OWN_TOOLS = [
    (surface, listed["name"]) for surface in OWN_SURFACES for listed in Rig(surface).tools()
]
UNKNOWN = "noSuchArgument"


def _open_objects(schema: Any, where: str) -> list[str]:
    """Where an object schema that names its properties leaves other properties open."""
    if isinstance(schema, list):
        return [hit for i, item in enumerate(schema) for hit in _open_objects(item, f"{where}.{i}")]
    if not isinstance(schema, dict):
        return []
    found = []
    named = schema.get("type") == "object" and "properties" in schema
    if named and schema.get("additionalProperties") is not False:
        found.append(where or "(arguments)")
    for key, value in schema.items():
        found += _open_objects(value, f"{where}.{key}" if where else key)
    return found


@pytest.mark.parametrize(("surface", "name"), OWN_TOOLS)
def test_every_own_tool_declares_a_closed_schema(surface: str, name: str) -> None:
    """REQ-SPEC-ARGS-001, REQ-MEM-SCHEMA-001."""
    listed = next(t for t in Rig(surface).tools() if t["name"] == name)
    assert _open_objects(listed["inputSchema"], "") == []


@pytest.mark.parametrize(("surface", "name"), OWN_TOOLS)
def test_an_unknown_argument_is_refused_naming_it(surface: str, name: str) -> None:
    """The call is refused before its handler runs (nothing embedded, nothing written), and
    the answer names the argument."""
    rig = Rig(surface)
    rig.gate.open.set()  # a handler that reaches a model runs through (and is counted)
    listed = next(t for t in rig.tools() if t["name"] == name)
    arguments = {**sample_arguments(listed["inputSchema"]), UNKNOWN: 1}
    reply = rig.session().handle_message(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )
    assert reply is not None
    result = reply["result"]
    assert result.get("isError") is True
    assert f"{UNKNOWN}: Unknown argument" in result["content"][0]["text"] or (
        json.loads(result["content"][0]["text"])["errorDetails"]["field"] == UNKNOWN
    )
    assert not rig.gate.reached(timeout=0), "the handler reached a model"
    assert rig.memory_store.files == {}


def test_memorize_names_the_unknown_argument_in_the_envelope() -> None:
    """REQ-MEM-SCHEMA-001: `query` written for `question` is refused, not ignored."""
    reply = (
        Rig("memorize")
        .session()
        .handle_message(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "query_qa", "arguments": {"query": "q", "context": "c"}},
            }
        )
    )
    assert reply is not None
    result = reply["result"]
    assert result["structuredContent"]["error"]["code"] == "invalid-argument"
    assert result["content"][0]["text"] == (
        "Input validation error: Invalid arguments for tool query_qa: "
        "question: Invalid input: expected string, received undefined, "
        "query: Unknown argument (known: question, context, limit)"
    )


def test_compat_lists_the_recorded_tools_byte_for_byte() -> None:
    """The original's tools/list is a recorded wire contract: loaded into Tools, it lists back
    unchanged, every tool in the recorded order."""
    path = resources.files("adapters.mcp") / "data" / "compat-2.8.3-tools.json"
    recorded = json.loads(path.read_text(encoding="utf-8"))
    listed = Rig("compat-2.8.3").tools()
    assert json.dumps(listed, ensure_ascii=False) == json.dumps(recorded, ensure_ascii=False)
    assert [t.name for t in CompatSurface.declared_tools] == [t["name"] for t in recorded]


def _handler(_surface: Any, _args: dict[str, Any]) -> dict[str, Any]:
    return {"content": []}


def test_a_recorded_tool_that_would_not_list_back_unchanged_is_refused() -> None:
    definition = {"name": "t", "description": "d", "inputSchema": {"type": "object"}}
    assert Tool.from_definition(definition, _handler).definition() == definition
    with pytest.raises(ValueError, match="does not list back"):
        Tool.from_definition({**definition, "execution": {"taskSupport": "optional"}}, _handler)
    with pytest.raises(ValueError, match="does not list back"):
        Tool.from_definition({"description": "d", **definition}, _handler)  # reordered


def test_a_surface_lists_its_tools_in_declaration_order_and_a_subclass_replaces_them() -> None:
    schema: dict[str, Any] = {"type": "object"}

    class Base(BaseSurface):
        name = "base"
        second = tool("second", "2", schema=schema, example={})(_handler)
        first = tool("first", "1", schema=schema, example={})(_handler)

    class Child(Base):
        second = tool("second", "two", schema=schema, example={})(_handler)
        third = tool("third", "3", schema=schema, example={})(_handler)

    assert [t["name"] for t in Base("v").tools()] == ["second", "first"]
    assert [(t["name"], t["description"]) for t in Child("v").tools()] == [
        ("second", "two"),
        ("first", "1"),
        ("third", "3"),
    ]
    assert set(Child.facts.tools) == {"first", "second", "third"}


def test_two_tools_of_one_name_are_refused() -> None:
    with pytest.raises(TypeError, match="twice"):

        class Twice(BaseSurface):
            one = tool("same", "1", schema={"type": "object"}, example={})(_handler)
            two = tool("same", "2", schema={"type": "object"}, example={})(_handler)
