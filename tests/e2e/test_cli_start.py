"""What one cold `qmd` command costs: the SQL statements a `search` runs and the modules the
commands that need no model import (issue 24, "the CLI builds only what the command uses";
figures against the original in benchmarks/bench_cli_start.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Qmd

SQL_BUDGET = 10

# Runs `main` in this interpreter and prints the modules left imported as its last line.
_MODULES_AFTER = (
    "import json, sys\n"
    "from adapters.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n"
    "sys.exit(code)\n"
)

# Model adapters, HTTP, document parsers, PostgreSQL and the servers: none of them serves a
# command that reads the index without a model.
FORBIDDEN_PREFIXES = (
    "llama_cpp",
    "adapters.models.llama",
    "adapters.models.remote",
    "adapters.models.http_json",
    "adapters.ldims_api",
    "adapters.extract.formats",
    "adapters.postgres.store",
    "adapters.http",
    "adapters.mcp",
    "http.client",
    "urllib.request",
    "pypdfium2",
    "docx",
    "openpyxl",
    "psycopg",
)


def _imported(qmd: Qmd, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _MODULES_AFTER, *args],
        cwd=qmd.root,
        env=qmd.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (args, done.stdout[-500:], done.stderr[-2000:])
    last = done.stdout.rstrip().splitlines()[-1]
    assert last.startswith("MODULES "), done.stdout[-500:]
    modules: list[str] = json.loads(last.removeprefix("MODULES "))
    return modules


def test_a_search_runs_at_most_ten_sql_statements(added: Qmd, tmp_path: Path) -> None:
    # the first start after `collection add` mirrors the changed index.yml into the index
    # (writes); the budget is that of every start after it
    added.ok("status")
    trace = tmp_path / "statements.txt"
    done = added.run("search", "authentication", QMD_SQL_TRACE=str(trace))
    assert done.returncode == 0 and "qmd://handbook/" in done.stdout, done.stderr
    lines = trace.read_text(encoding="utf-8").splitlines()
    # FTS5 marks the statements it runs on its own shadow tables with `-- `
    ours = [line for line in lines if not line.startswith("-- ")]
    assert any("MATCH" in line for line in ours), ours  # the trace saw the search itself
    assert len(ours) <= SQL_BUDGET, "\n".join(ours)


def test_opening_a_current_index_changes_no_schema(added: Qmd, tmp_path: Path) -> None:
    trace = tmp_path / "statements.txt"
    assert added.run("status", QMD_SQL_TRACE=str(trace)).returncode == 0
    statements = trace.read_text(encoding="utf-8").upper()
    for ddl in ("CREATE ", "DROP ", "JOURNAL_MODE", "BUSY_TIMEOUT"):
        assert ddl not in statements, ddl


@pytest.mark.parametrize(
    "args",
    [("search", "authentication"), ("status",), ("get", "handbook/README.md"), ("ls",)],
    ids=["search", "status", "get", "ls"],
)
def test_commands_without_models_import_no_model_http_or_parser_code(
    added: Qmd, args: tuple[str, ...]
) -> None:
    modules = _imported(added, *args)
    assert "adapters.sqlite.store" in modules  # the index was opened in this process
    found = [m for m in modules if m.startswith(FORBIDDEN_PREFIXES)]
    assert found == [], found


def test_a_search_imports_no_other_command(added: Qmd) -> None:
    modules = _imported(added, "search", "authentication")
    commands = {m for m in modules if m.startswith("adapters.cli.commands.")}
    assert commands == {"adapters.cli.commands.search"}


# What a cold `qmd search` imported before issue 35 and never uses: the use cases and storage
# ports of other commands (projmem, chunk rows, extraction, file stamps, the copy's dump,
# folder scanning, session transcripts) and the standard modules only they need.
SEARCH_NEVER_IMPORTS = (
    "domain.usecases.projmem",
    "domain.usecases.chunks",
    "domain.usecases.collections",
    "domain.usecases.extraction",
    "domain.usecases.status",
    "domain.filters",
    "domain.extraction",
    "domain.paths",
    "domain.stamps",
    "adapters.sqlite.chunks",
    "adapters.sqlite.extraction",
    "adapters.sqlite.stamps",
    "adapters.sqlite.memory",
    # (adapters.sqlite.metadata is imported: SqliteMetadata is a part SqliteIndex is built
    # from, as PgMetadata is PostgresIndex's; what only a metadata read needs stays out)
    "domain.metadata",
    "adapters.sqlite.dump",
    "adapters.sqlite.rank_ext",
    "adapters.fs.claude_sessions",
    "adapters.fs.content_source",
    "yaml",
    "hashlib",  # OpenSSL's load: the config's hash comes from the parse cache
    "subprocess",
    "tempfile",
    "shutil",
    "urllib.parse",
    "ipaddress",
    "pathlib",
    "importlib.util",
)
# The project's own modules a search may import (60 when this was set, with the method cache
# and the folder rules it reads; 100 in issue 24's tree): each costs a cold start its load and
# its classes.
SEARCH_OWN_MODULES = 60


def test_a_search_imports_nothing_only_other_commands_need(added: Qmd) -> None:
    added.ok("search", "authentication")  # index.yml parsed once, as by any earlier command
    modules = _imported(added, "search", "authentication")
    assert "adapters.sqlite.store" in modules  # the index was opened in this process
    found = sorted(set(modules) & set(SEARCH_NEVER_IMPORTS))
    assert found == [], found
    own = [m for m in modules if m.split(".")[0] in ("adapters", "domain")]
    assert len(own) <= SEARCH_OWN_MODULES, own


def test_a_status_imports_no_port_or_module_it_does_not_use(added: Qmd) -> None:
    added.ok("status")
    modules = _imported(added, "status")
    unused = (
        "domain.usecases.projmem",
        "domain.filters",
        "adapters.sqlite.chunks",
        "adapters.sqlite.stamps",
        "adapters.sqlite.memory",
        "adapters.sqlite.dump",
        "adapters.fs.claude_sessions",
        "adapters.fs.content_source",
        "yaml",
        "subprocess",
        "tempfile",
        "decimal",  # the sizes are rounded on the float's exact ratio
        "logging",  # the idle unloader's: no model is loaded
        "importlib.util",
        # a model file's lookup and a remote reference's parse: status only names references
        "pathlib",
        "urllib.parse",
        "ipaddress",
    )
    found = sorted(set(modules) & set(unused))
    assert found == [], found


# Runs `main` and prints how many times the cyclic garbage collector ran inside it.
_COLLECTIONS_DURING = (
    "import gc, sys\n"
    "from adapters.cli.main import main\n"
    "runs = []\n"
    "gc.callbacks.append(lambda phase, info: runs.append(phase) if phase == 'start' else None)\n"
    "code = main(sys.argv[1:])\n"
    "print(f'\\nCOLLECTIONS {len(runs)}')\n"
    "sys.exit(code)\n"
)


@pytest.mark.parametrize(
    "args", [("search", "authentication"), ("status",)], ids=["search", "status"]
)
def test_a_cold_command_runs_no_garbage_collection(added: Qmd, args: tuple[str, ...]) -> None:
    # start-up builds long-lived objects, not garbage: about 30 collections (some 5 ms of a
    # search) found nothing to free before issue 35
    added.ok(*args)
    last = _run_main(added, _COLLECTIONS_DURING, *args).rstrip().splitlines()[-1]
    assert last == "COLLECTIONS 0", last


# Runs `main` and prints how many source texts were compiled or executed as text inside it
# (the dataclass methods Python writes and compiles when it creates a dataclass).
_TEXTS_COMPILED = (
    "import builtins, sys\n"
    "texts = []\n"
    "real_exec, real_compile = builtins.exec, builtins.compile\n"
    "def exec_(source, *rest):\n"
    "    if isinstance(source, str): texts.append(source)\n"
    "    return real_exec(source, *rest)\n"
    "def compile_(source, filename, mode, *rest, **named):\n"
    "    if mode == 'exec': texts.append(source)\n"
    "    return real_compile(source, filename, mode, *rest, **named)\n"
    "builtins.exec, builtins.compile = exec_, compile_\n"
    "from adapters.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print(f'\\nTEXTS {len(texts)}')\n"
    "sys.exit(code)\n"
)


def _texts_compiled(qmd: Qmd, *args: str) -> tuple[int, str]:
    stdout = _run_main(qmd, _TEXTS_COMPILED, *args)
    *shown, last = stdout.rstrip().splitlines()
    assert last.startswith("TEXTS "), stdout[-500:]
    return int(last.removeprefix("TEXTS ")), "\n".join(shown)


def test_a_second_cold_search_compiles_no_dataclass_method(added: Qmd) -> None:
    # before issue 35 every start compiled about 260 method texts, a quarter of a search
    added.ok("search", "authentication")
    compiled, _shown = _texts_compiled(added, "search", "authentication")
    assert compiled == 0


def test_a_damaged_method_cache_is_compiled_around_and_rewritten(added: Qmd) -> None:
    first = added.ok("search", "authentication")
    cache = Path(added.env()["XDG_CACHE_HOME"]) / "qmd"
    files = list(cache.glob("dataclass-methods-*.marshal"))
    assert len(files) == 1, sorted(p.name for p in cache.iterdir())
    files[0].write_bytes(b"\xffnot marshal data")
    compiled, shown = _texts_compiled(added, "search", "authentication")
    assert compiled > 0 and shown.strip() == first.strip()
    assert _texts_compiled(added, "search", "authentication")[0] == 0


def _run_main(qmd: Qmd, script: str, *args: str) -> str:
    """`script` (which runs the CLI's `main` with `args`) in a fresh process in `qmd`'s
    folder and environment; its standard output, once it has exited 0."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=qmd.root,
        # the count includes modules compiled from source: a shell that keeps Python from
        # writing bytecode (PYTHONDONTWRITEBYTECODE) would recompile every edited module
        env={k: v for k, v in qmd.env().items() if k != "PYTHONDONTWRITEBYTECODE"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-500:], done.stderr[-2000:])
    return done.stdout
