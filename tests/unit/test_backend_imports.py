"""Issue 35: a backend is its package plus one registry line; nothing else imports it.

The rule, over the production packages (adapters, domain, conformance, tooling): no module
outside a backend package (`adapters/sqlite`, `adapters/postgres`) imports any module of it,
at any depth of the module (function bodies, `TYPE_CHECKING` blocks): not
`import adapters.<backend>[.x]`, not `from adapters.<backend>[.x] import …`, not
`from adapters import <backend>`, not `importlib.import_module` / `__import__` of a string
naming one. The registry (adapters/storage/registry.py) imports none either: it names each
backend package by strings inside its one `BackendKind(...)` entry, and opens or asks it
lazily. Tests and benchmarks drive concrete classes on purpose and are not scanned. The
tests' in-memory backend (tests/memory_backend, registered by tests/backend_locations.py) is a
backend package too: no production module imports it either, though the registry's own
`KINDS`, and so its one-entry rule, hold the production backends only."""

from __future__ import annotations

import ast
from pathlib import Path

from adapters.storage.registry import KINDS, all_kinds
from tests.backend_locations import LOCATIONS

REPO = Path(__file__).resolve().parents[2]
# every production backend's package: the package of its `open_backend` module
BACKEND_PACKAGES = tuple(kind.module.rpartition(".")[0] for kind in KINDS)
# and those of the kinds registered at run time (the tests' in-memory backend)
ALL_BACKEND_PACKAGES = tuple(kind.module.rpartition(".")[0] for kind in all_kinds())
SCANNED = ("adapters", "domain", "conformance", "tooling")
REGISTRY = REPO / "adapters" / "storage" / "registry.py"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _backend_of(module: str, packages: tuple[str, ...] = ALL_BACKEND_PACKAGES) -> str | None:
    return next((pkg for pkg in packages if module == pkg or module.startswith(pkg + ".")), None)


def backend_imports(source: str, module: str) -> list[str]:
    """Each place `source` (the module `module`) imports a backend package it is not part of."""
    own = _backend_of(module)
    found: list[str] = []

    def foreign(name: str) -> bool:
        backend = _backend_of(name)
        return backend is not None and backend != own

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"{module}:{node.lineno} import {a.name}" for a in node.names if foreign(a.name)
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if foreign(node.module):
                found.append(f"{module}:{node.lineno} from {node.module} import …")
            elif node.module == "adapters":
                found += [
                    f"{module}:{node.lineno} from adapters import {a.name}"
                    for a in node.names
                    if foreign(f"adapters.{a.name}")
                ]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if (
                name in ("import_module", "__import__")
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and foreign(first.value)
            ):
                found.append(f"{module}:{node.lineno} {name}({first.value!r})")
    return found


def test_no_module_outside_a_backend_package_imports_it() -> None:
    assert {"adapters.sqlite", "adapters.postgres"} <= set(BACKEND_PACKAGES)
    assert "tests.memory_backend" in ALL_BACKEND_PACKAGES and "fake" in LOCATIONS
    found: list[str] = []
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            found += backend_imports(path.read_text(encoding="utf-8"), _module_name(path))
    assert found == []


def test_the_import_check_catches_each_form() -> None:
    offending = {
        "from adapters.postgres.url import config_label": 1,
        "from adapters.sqlite import store": 1,
        "import adapters.postgres.url as u": 1,
        "from adapters import postgres, sqlite": 2,
        "def f():\n    from adapters.postgres.store import PostgresIndex\n": 1,
        "if TYPE_CHECKING:\n    from adapters.sqlite.store import SqliteIndex\n": 1,
        "import importlib\nimportlib.import_module('adapters.postgres.url')": 1,
        "__import__('adapters.sqlite.backend')": 1,
    }
    for source, count in offending.items():
        assert len(backend_imports(source, "adapters.locations")) == count, source
    # inside its own package, and a neighbour whose name merely begins alike, are fine
    assert (
        backend_imports("from adapters.postgres.url import split_schema", "adapters.postgres.store")
        == []
    )
    assert backend_imports("from adapters.sqlite_extra import x", "adapters.locations") == []
    # a backend package importing the other is an offence too
    assert (
        len(backend_imports("from adapters.sqlite.lexical import x", "adapters.postgres.bm25")) == 1
    )
    # the tests' backend, registered at run time, is guarded like the production ones
    fake = "from tests.memory_backend.backend import open_backend"
    assert len(backend_imports(fake, "adapters.bootstrap")) == 1
    assert backend_imports("from tests.fakes import InMemoryStore", "adapters.bootstrap") == []


def test_a_kind_registered_at_run_time_stays_out_of_the_production_kinds() -> None:
    """The fake's package is no production backend: the one-entry rule and the words the
    transports must not decide by (tests/unit/test_backend_guard.py) read `KINDS` alone."""
    assert "fake" not in {kind.name for kind in KINDS}
    assert not any(pkg.startswith("tests") for pkg in BACKEND_PACKAGES)
    assert {kind.name for kind in all_kinds()} == {*(kind.name for kind in KINDS), "fake"}


def test_the_registry_names_each_backend_package_in_one_entry() -> None:
    """The one registry line: every string naming a backend package's module lies inside a
    single `BackendKind(...)` call of the registry, one call per package."""
    tree = ast.parse(REGISTRY.read_text(encoding="utf-8"))
    entries: dict[str, set[int]] = {pkg: set() for pkg in BACKEND_PACKAGES}
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "BackendKind"
    ]
    loose = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            backend = _backend_of(node.value, BACKEND_PACKAGES)
            if backend is None:
                continue
            owner = [i for i, call in enumerate(calls) if node in set(ast.walk(call))]
            if owner:
                entries[backend].add(owner[0])
            else:
                loose.append(f"{node.lineno}: {node.value!r}")
    assert loose == []
    assert all(len(found) == 1 for found in entries.values()), entries
