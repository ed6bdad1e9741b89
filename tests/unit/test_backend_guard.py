"""Issue 24: no code outside a backend's own package asks which class stores the index. A
module elsewhere that imports a class of `adapters/sqlite` or `adapters/postgres`, or asks
`isinstance(..., <such a class>)`, fails here; the backend registry (adapters/storage/registry.py)
names each package by its module path, as a string, and is the one place that does."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from adapters.storage.registry import KINDS, kind_of

REPO = Path(__file__).resolve().parents[2]
# every registered backend's package: the package of its `open_backend` module
BACKEND_PACKAGES = tuple(kind.module.rpartition(".")[0] for kind in KINDS)
# production code (tests and benchmarks drive concrete classes on purpose)
SCANNED = ("adapters", "domain", "conformance", "tooling")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in_backend(module: str) -> bool:
    return any(module == pkg or module.startswith(pkg + ".") for pkg in BACKEND_PACKAGES)


def store_classes() -> frozenset[str]:
    """Every class a backend package defines."""
    names: set[str] = set()
    for package in BACKEND_PACKAGES:
        for path in (REPO / package.replace(".", "/")).glob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names.update(node.name for node in tree.body if isinstance(node, ast.ClassDef))
    return frozenset(names)


def _names_in(node: ast.expr) -> Iterator[str]:
    """The class names an `isinstance` second argument mentions (`A`, `mod.A`, `(A, B)`,
    `A | B`)."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.Tuple):
        for element in node.elts:
            yield from _names_in(element)
    elif isinstance(node, ast.BinOp):
        yield from _names_in(node.left)
        yield from _names_in(node.right)


def offences(source: str, module: str, classes: frozenset[str]) -> list[str]:
    """What in `source` (the module `module`) names a store class outside its package."""
    if _in_backend(module):
        return []
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and _in_backend(node.module):
            found += [
                f"{module}:{node.lineno} imports {alias.name} from {node.module}"
                for alias in node.names
                if alias.name in classes or alias.name == "*"
            ]
        elif isinstance(node, ast.ImportFrom) and node.module == "adapters":
            found += [
                f"{module}:{node.lineno} imports the package {alias.name}"
                for alias in node.names
                if f"adapters.{alias.name}" in BACKEND_PACKAGES
            ]
        elif isinstance(node, ast.Import):
            found += [
                f"{module}:{node.lineno} imports {alias.name}"
                for alias in node.names
                if _in_backend(alias.name) and alias.name not in BACKEND_PACKAGES
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
        ):
            found += [
                f"{module}:{node.lineno} asks {node.func.id}(..., {name})"
                for name in _names_in(node.args[1])
                if name in classes
            ]
    return found


def test_no_module_outside_a_backend_package_names_a_store_class() -> None:
    classes = store_classes()
    assert {"SqliteIndex", "PostgresIndex", "SqliteChunkIndex"} <= classes
    found: list[str] = []
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            found += offences(path.read_text(encoding="utf-8"), _module_name(path), classes)
    assert found == []


def test_the_guard_catches_each_way_of_naming_a_store_class() -> None:
    """The checker itself: each form below is an offence outside a backend package, none is
    inside one, and a function of a backend package (not a class) may be imported."""
    classes = store_classes()
    offending = {
        "from adapters.sqlite.store import SqliteIndex": 1,
        "from adapters.postgres.store import PostgresIndex as P": 1,
        "import adapters.postgres.store": 1,
        "from adapters import postgres": 1,
        "ok = isinstance(index, SqliteIndex)": 1,
        "ok = isinstance(index, (SqliteIndex, store.PostgresIndex))": 2,
        "ok = isinstance(index, SqliteIndex | PostgresIndex)": 2,
    }
    for source, count in offending.items():
        assert len(offences(source, "adapters.bootstrap", classes)) == count, source
        assert offences(source, "adapters.sqlite.dump", classes) == [], source
    allowed = "from adapters.postgres.url import redact\nok = isinstance(x, str)"
    assert offences(allowed, "adapters.cli.commands.index", classes) == []


def test_the_registry_opens_every_backend_package_by_name() -> None:
    """A backend is one package and one line in `adapters.storage.registry.KINDS`."""
    assert {kind.module for kind in KINDS} == {f"{pkg}.backend" for pkg in BACKEND_PACKAGES}
    assert {"adapters.sqlite", "adapters.postgres"} <= set(BACKEND_PACKAGES)
    assert kind_of("postgresql://u@h/db?schema=s").name == "postgresql"
    assert kind_of("postgres://h/db").name == "postgresql"
    assert kind_of("/tmp/index.sqlite").name == "sqlite"
    assert kind_of("relative/postgresql://odd.sqlite").name == "sqlite"


def test_opening_a_sqlite_index_imports_no_other_backend(tmp_path: Path) -> None:
    """The registry imports a backend package only for a location of its kind: a SQLite
    index never pays for the PostgreSQL driver (about 0.2 s of every `qmd` start)."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from adapters.storage.registry import open_backend\n"
        f"open_backend({str(tmp_path / 'index.sqlite')!r}).close()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('psycopg', 'adapters.postgres'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stdout


# the transports and the CLI: they serve whatever backend the registry opened
FRONT_ENDS = ("adapters/cli", "adapters/http", "adapters/mcp")


def _backend_words() -> frozenset[str]:
    return frozenset(word for kind in KINDS for word in (kind.name, kind.label, *kind.schemes))


def backend_naming(tree: ast.AST, words: frozenset[str]) -> list[str]:
    """Where a module imports from a backend package, or compares with (or tests a prefix
    against) a backend's name or scheme: the CLI and transports would then behave per backend
    by name. Help texts and messages may mention a backend; only decisions count."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and _in_backend(node.module):
            found.append(f"{node.lineno}: from {node.module} import …")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = [o.value for o in operands if isinstance(o, ast.Constant) and o.value in words]
            if named:
                found.append(f"{node.lineno}: compares with {named[0]!r}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
        ):
            for arg in ast.walk(ast.Tuple(elts=list(node.args), ctx=ast.Load())):
                if isinstance(arg, ast.Constant) and arg.value in words:
                    found.append(f"{node.lineno}: {node.func.attr}({arg.value!r})")
    return found


def test_no_transport_or_cli_module_decides_by_a_backend_name() -> None:
    words = _backend_words()
    offenders: list[str] = []
    for front in FRONT_ENDS:
        for path in sorted((REPO / front).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            offenders += [f"{path.relative_to(REPO)}:{hit}" for hit in backend_naming(tree, words)]
    assert offenders == []


def test_the_naming_check_flags_each_form_it_looks_for() -> None:
    words = _backend_words()
    source = (
        "from adapters.postgres.url import redact\n"
        "if app.backend == 'postgresql': pass\n"
        "if 'sqlite' != name: pass\n"
        "url.startswith(('postgresql://', 'x'))\n"
        "print('the PostgreSQL (pgvector) index')\n"  # a message: allowed
    )
    hits = backend_naming(ast.parse(source), words)
    assert [hit.split(":")[0] for hit in hits] == ["1", "2", "3", "4"]
