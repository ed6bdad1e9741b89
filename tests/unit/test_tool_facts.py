"""Surfaces declare their tools' facts where they register them, and transports read the facts,
never a name (REQ-MCP-HTTP-009). Generated from the surface registry: a new surface, or a new
tool, is covered by registering it."""

from __future__ import annotations

import argparse
import ast
import queue
from pathlib import Path

import pytest

from adapters.cli.parser import build_parser
from adapters.mcp import registry
from adapters.mcp.dispatch import BUSY
from tests.guarantees import Rig, Stdio, model_calls, served_surfaces

REPO = Path(__file__).resolve().parents[2]
# The transports and the CLI: they serve any surface, so none may name one, or a tool.
TRANSPORT_FILES = sorted(
    [
        *(REPO / "adapters" / "http").glob("*.py"),
        *(REPO / "adapters" / "cli").rglob("*.py"),
        *(
            REPO / "adapters" / "mcp" / f"{name}.py"
            for name in ("dispatch", "workers", "stdio", "protocol", "outgoing")
        ),
    ]
)
SURFACES = served_surfaces()
MODEL_CALLS = [
    (surface, tool, arguments)
    for surface in SURFACES
    for tool, arguments in model_calls(Rig(surface))
]


@pytest.mark.parametrize("surface", SURFACES)
def test_every_tool_declares_its_facts(surface: str) -> None:
    listed = {tool["name"] for tool in Rig(surface).tools()}
    assert set(registry.surface_facts(surface).tools) == listed


def test_the_model_tools_of_every_surface_are_declared() -> None:
    """The tools issue 22 found running unbounded in the read pool are model tools now."""
    declared = {(surface, tool) for surface, tool, _ in MODEL_CALLS}
    for expected in [
        ("projmem", "projmem_vector_search"),
        ("projmem", "projmem_deep_search"),
        ("ldims", "searchDocuments"),
        ("memorize", "query_qa"),
        ("memorize", "store_qa"),
        ("memorize", "merge_knowledge"),
        ("spec", "vsearch"),
        ("spec", "query"),
        ("compat-2.8.3", "query"),
    ]:
        assert expected in declared


def _names() -> tuple[set[str], set[str]]:
    """(names that may appear nowhere in a transport, names shared with CLI commands)."""
    names = registry.surface_names()
    surfaces = set(names) | set(registry.surface_aliases())
    tools = {tool for surface in names for tool in registry.surface_facts(surface).tools}
    commands = _command_names(build_parser()[0])
    return surfaces | (tools - commands), tools & commands


def _command_names(parser: argparse.ArgumentParser) -> set[str]:
    """Every CLI command and sub-command name (`qmd skills get` names `get`)."""
    names: set[str] = set()
    for action in parser._actions:  # argparse keeps sub-commands only here
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                names |= {name, *_command_names(child)}
    return names


def _mentions(path: Path, strict: set[str], shared: set[str]) -> list[str]:
    """Where `path` tests a name: a surface name, alias or surface-only tool name anywhere as
    a string; a tool name a CLI command shares when it is compared, matched by prefix or passed
    to a function (reading a JSON key, `.get("query")`, or naming a CLI command is no test)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    found = []
    prefixes = {name.split("-")[0] + "-" for name in strict if "-" in name}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docstrings:
                continue
            if node.value in strict or node.value in prefixes:
                found.append(f"{where}:{node.lineno}: {node.value!r}")
        suspects: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            suspects = [node.left, *node.comparators]
        elif isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if callee not in ("get", "command", "add_argument", "pop", "setdefault"):
                suspects = list(node.args)
        for suspect in suspects:
            if isinstance(suspect, ast.Constant) and suspect.value in shared:
                found.append(f"{where}:{suspect.lineno}: {suspect.value!r}")
    return found


def test_no_transport_or_cli_module_names_a_surface_or_a_tool() -> None:
    """In the CLI a name it shares with a command of its own (`get`, `query`) names that
    command, so only the names it does not share are checked there."""
    strict, shared = _names()
    assert "merge_knowledge" in strict and "memorize" in strict and "query" in shared
    cli = REPO / "adapters" / "cli"
    found = [
        hit
        for path in TRANSPORT_FILES
        for hit in _mentions(path, strict, set() if path.is_relative_to(cli) else shared)
    ]
    assert found == []


def test_the_name_scan_sees_a_name_test(tmp_path: Path) -> None:
    """The scan itself: the tests issue 22 found would be caught."""
    strict, shared = _names()
    sample = tmp_path / "sample.py"
    sample.write_text(
        'def f(name, surface):\n    return surface.startswith("compat-") or name == "vsearch"\n'
    )
    assert len(_mentions(sample, strict, shared)) == 2


@pytest.mark.parametrize(("surface", "tool", "arguments"), MODEL_CALLS)
def test_every_model_tool_goes_to_the_bounded_model_lane(
    surface: str, tool: str, arguments: dict[str, object]
) -> None:
    """A call that runs a model holds the only model thread (no queue); a second one is refused
    at once as busy, which only the model lane does, while `ping` and fast requests are
    answered. On the old code these tools ran in the read pool, unbounded."""
    rig = Rig(surface)
    stdio = Stdio(rig, rig.pools(model_threads=1, model_queue=0))
    try:
        stdio.handshake()
        stdio.call(1, tool, arguments)
        assert rig.gate.reached(), f"{surface} {tool} never reached its model"
        stdio.call(2, tool, arguments)
        busy = stdio.reply()
        assert busy["id"] == 2 and busy["error"]["code"] == BUSY
        stdio.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert stdio.reply() == {"result": {}, "jsonrpc": "2.0", "id": 3}
        stdio.send({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
        assert stdio.reply()["id"] == 4
        rig.gate.open.set()
        done = stdio.reply()
        assert done["id"] == 1 and "result" in done
    finally:
        rig.gate.open.set()
        stdio.close()
    with pytest.raises(queue.Empty):
        stdio.reply(timeout=0.05)
