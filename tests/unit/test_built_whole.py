"""Objects are built whole: no function under adapters/ or domain/ builds an object (calls a
class) and then sets an attribute on it. What an object needs comes in through its
constructor, so the composition root and the transports read as what they build, and a part
forgotten is a missing argument, not a silently unset attribute (issue 35)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _class_call(node: ast.expr) -> bool:
    """A call of a capitalised name: building an instance (`Session(...)`, `mod.Job()`)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return name[:1].isupper()


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = []
        for target in node.targets:
            found.extend(target.elts if isinstance(target, ast.Tuple) else [target])
        return found
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    return []


def set_after_construction(source: str) -> list[tuple[int, str]]:
    """(line, `name.attribute`) for each attribute set on an object its own function built."""
    found: set[tuple[int, str]] = set()  # a nested function is walked with its outer one too
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        built = {
            target.id
            for node in ast.walk(function)
            if isinstance(node, ast.Assign) and _class_call(node.value)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(function):
            for target in _targets(node):
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id in built
                ):
                    found.add((target.lineno, f"{target.value.id}.{target.attr}"))
    return sorted(found)


def test_the_scan_finds_an_attribute_set_after_construction() -> None:
    source = (
        "def build(parts):\n"
        "    memory = SessionMemory(parts.sessions)\n"
        "    memory.refusal = parts.refusal\n"
        "    session, other = Session(surface), make()\n"
        "    job = workers.Job()\n"
        "    job.deadline, job.every = 1.0, 2.0\n"
        "    other.ok = 1  # not built here by a class\n"
        "    return memory\n"
    )
    assert set_after_construction(source) == [
        (3, "memory.refusal"),
        (6, "job.deadline"),
        (6, "job.every"),
    ]


def test_no_object_is_given_an_attribute_after_it_is_built() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for folder in ("adapters", "domain")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, name in set_after_construction(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "\n".join(offenders)
