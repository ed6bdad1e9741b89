"""Structure the import-linter contracts cannot state: no import cycles at all (imports inside
functions included), small use-case signatures, and requirement IDs in code that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp

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
