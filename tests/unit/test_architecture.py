"""Structure the import-linter contracts cannot state: no import cycles at all (imports inside
functions included), small use-case signatures, requirement IDs in code that exist, and an
application object its constructor alone builds."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import grimp
import pytest

from conformance import requirements

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("domain", "adapters", "conformance")
MAX_USE_CASE_PARAMETERS = 6


def _cycles() -> list[list[str]]:
    """Strongly connected components of the module import graph with more than one module."""
    graph = grimp.build_graph(*PACKAGES)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(module: str) -> None:
        nonlocal counter
        index[module] = low[module] = counter
        counter += 1
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in graph.modules:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles() -> None:
    # A package and its own __init__ re-exports are not cycles worth reporting: there are none.
    assert _cycles() == []


def test_use_case_functions_take_at_most_six_parameters() -> None:
    too_many = []
    for path in sorted((REPO / "domain" / "usecases").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                count += (a.vararg is not None) + (a.kwarg is not None)
                if count > MAX_USE_CASE_PARAMETERS:
                    too_many.append(f"{path.name}:{node.lineno} {node.name} ({count})")
    assert too_many == []


def test_the_app_is_built_by_its_constructor_alone() -> None:
    # issue 35: what an `App` holds is given to its constructor, never set on it after (a
    # wiring step that patched fields in would make two apps of one backend differ)
    from tests.fakes import InMemoryStore, app_over

    app = app_over(InMemoryStore())
    with pytest.raises(dataclasses.FrozenInstanceError):
        app.home = "/elsewhere"  # type: ignore[misc]
    assigned = []
    for path in sorted((REPO / "adapters").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                owner = target.value if isinstance(target, ast.Attribute) else None
                if isinstance(owner, ast.Name) and owner.id == "app":
                    assigned.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert assigned == []


_CITED = re.compile(r"\bREQ-[A-Z][A-Z0-9]*(?:-[A-Z][A-Z0-9]*)*(?:-\d{3}|-\*)")
_LEGACY = re.compile(r"\breq [A-Z]{2,}-")


def test_every_requirement_cited_in_code_exists() -> None:
    known = set(requirements.load())
    missing, legacy = [], []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            where = path.relative_to(REPO)
            legacy += [f"{where}: {m.group(0)}" for m in _LEGACY.finditer(text)]
            for match in _CITED.finditer(text):
                cited = match.group(0)
                if cited.endswith("-*"):
                    ok = any(k.startswith(cited[:-1]) for k in known)
                else:
                    ok = cited in known
                if not ok:
                    missing.append(f"{where}: {cited}")
    assert missing == []
    assert legacy == []
