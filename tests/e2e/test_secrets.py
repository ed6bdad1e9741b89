"""REQ-SEC-SECRET-001 end to end: real `qmd` processes given a PostgreSQL password, in the
userinfo and as `?password=` / `?sslpassword=` (both of which libpq takes), never print it:
not in a start-up error of any command, not in `status`, `doctor`, `index copy`, the MCP
`status` tool, the HTTP service or its log."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from adapters.cli.parser import COMMAND_NAMES
from tests.http_harness import HttpServer
from tests.mcp_harness import REPO, StdioServer, fixture_env
from tests.postgres_server import drop_schema, server_url

SECRET = "s3cret"
# Nothing listens on port 1: every command that opens this index fails at once, and says which.
DEAD = f"postgresql://u:{SECRET}@127.0.0.1:1/qmd?password={SECRET}&sslpassword={SECRET}&schema=t"
UNOPENED = "cannot open the PostgreSQL index postgresql://u:***@127.0.0.1:1/qmd?password=***"

# Every top-level command, with arguments that make it open the index ({tmp}: the test's own
# folder). One that never opens it is listed with False and checked all the same. A command
# added to the CLI fails test_the_table_names_every_command until it is listed here.
COMMANDS: dict[str, tuple[list[str], bool]] = {
    "collection": (["collection", "list"], True),
    "context": (["context", "list"], True),
    "init": (["init"], True),
    "trust": (["trust"], True),
    "update": (["update"], True),
    "ls": (["ls"], True),
    "status": (["status"], True),
    "cleanup": (["cleanup"], True),
    "index": (["index", "copy", DEAD, "{tmp}/copy.sqlite"], True),
    "embed": (["embed"], True),
    "doctor": (["doctor"], True),
    "pull": (["pull"], True),
    "search": (["search", "x"], True),
    "vsearch": (["vsearch", "x"], True),
    "vector-search": (["vector-search", "x"], True),
    "query": (["query", "x"], True),
    "deep-search": (["deep-search", "x"], True),
    "get": (["get", "x"], True),
    "multi-get": (["multi-get", "x"], True),
    "session": (["session", "list"], True),
    "bench": (["bench", "{tmp}/bench.json"], True),
    "skills": (["skills"], False),
    "skill": (["skill", "show"], False),
    "mcp": (["mcp"], True),
    "server": (["server"], True),
}
# Other ways in: the daemon's start (it prints the failed child's log), the URL as a flag.
MORE = {
    "mcp-daemon": (["mcp", "--http", "--daemon", "--port", "0"], True),
    "index-url-flag": (["--index-url", DEAD, "status"], True),
    "http-server": (["server", "--transport", "http", "--port", "0"], True),
}


def qmd(
    env: dict[str, str], args: list[str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        env=env,
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _env(tmp_path: Path, index: str) -> dict[str, str]:
    env = fixture_env(tmp_path)
    env.update(INDEX_PATH=index, QMD_OFFLINE="1", PYTHONPATH=str(REPO))
    return env


def test_the_table_names_every_command() -> None:
    assert set(COMMANDS) == set(COMMAND_NAMES)


@pytest.mark.slow
@pytest.mark.parametrize("name", [*COMMANDS, *MORE])
def test_no_command_shows_the_password_of_an_index_it_cannot_open(
    tmp_path: Path, name: str
) -> None:
    args, opens = {**COMMANDS, **MORE}[name]
    (tmp_path / "bench.json").write_text('{"queries": []}', encoding="utf-8")
    done = qmd(_env(tmp_path, DEAD), [arg.format(tmp=tmp_path) for arg in args], tmp_path)
    shown = done.stdout + done.stderr
    assert SECRET not in shown, shown
    if opens:  # the URL was shown, masked (so the check above saw it)
        assert done.returncode != 0 and UNOPENED in shown, shown


# URLs that make libpq or Python quote what they could not read
UNREADABLE = {
    # libpq: `invalid percent-encoded token: "s3cret%zz"`, no `password=` beside it (a query's
    # values reach libpq re-encoded by `split_schema`, so only the userinfo can do this)
    "libpq-echo": (f"postgresql://u:{SECRET}%zz@127.0.0.1:1/qmd", "token"),
    # Python's URL parser refuses an unclosed IPv6 bracket (before: an internal error)
    "unclosed-ipv6": (f"postgresql://u:{SECRET}@[::1/qmd?schema=t", "qmd can read"),
}


@pytest.mark.parametrize("command", ["status", "index-copy", "mcp"])
@pytest.mark.parametrize("case", list(UNREADABLE))
def test_start_up_errors_quote_no_password_even_as_libpq_echoes_it(
    tmp_path: Path, case: str, command: str
) -> None:
    url, said = UNREADABLE[case]
    args = {
        "status": ["status"],
        "index-copy": ["index", "copy", url, str(tmp_path / "copy.sqlite")],
        "mcp": ["mcp"],
    }[command]
    done = qmd(_env(tmp_path, url), args, tmp_path)
    assert SECRET not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 1 and said in done.stderr, done.stderr
    assert "internal error" not in done.stderr


# -- against the local PostgreSQL ------------------------------------------------------------


def _forms(base: str, schema: str) -> dict[str, tuple[str, str]]:
    """(URL, its password) per form: the server's own password where it has one (a server
    that trusts local connections takes any)."""
    parts = urlsplit(base)
    password = parts.password or SECRET
    where = f"{parts.hostname}:{parts.port}{parts.path}"
    return {
        "userinfo": (f"postgresql://{parts.username}:{password}@{where}?schema={schema}", password),
        "query": (
            f"postgresql://{parts.username}@{where}?password={password}"
            f"&sslpassword={SECRET}&schema={schema}",
            password,
        ),
    }


@pytest.fixture
def schemas() -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        drop_schema(name)


@pytest.mark.postgres
@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_what_every_surface_shows_of_a_live_index_holds_no_password(
    tmp_path: Path, form: str, schemas: list[str]
) -> None:
    import uuid

    name = "t_" + uuid.uuid4().hex[:16]
    schemas += [name, name + "_copy"]
    url, password = _forms(server_url(), name)[form]
    copy_url, _ = _forms(server_url(), name + "_copy")[form]
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A note\n\nabout rate limits\n", encoding="utf-8")
    env = _env(tmp_path, url)
    shown: dict[str, str] = {}

    def run(label: str, args: list[str], ok: bool = True) -> str:
        done = qmd(env, args, tmp_path)
        if ok:
            assert done.returncode == 0, f"{label}: {done.stderr}"
        shown[label] = done.stdout + done.stderr
        return done.stdout

    run("collection add", ["collection", "add", str(notes), "--name", "notes"])
    assert "Index: postgresql://" in run("status", ["status"])
    run("doctor", ["doctor"], ok=False)  # no models here: doctor may fail; what it shows counts
    assert "INDEX_PATH=postgresql://" in shown["doctor"]
    copy = tmp_path / "copy.sqlite"
    assert "Copied postgresql://" in run("copy out", ["index", "copy", url, str(copy)])
    assert "-> postgresql://" in run("copy in", ["index", "copy", str(copy), copy_url])
    run("copy onto itself", ["index", "copy", url, url], ok=False)
    run("copy into a full index", ["index", "copy", str(copy), copy_url], ok=False)

    stdio = StdioServer(env, cwd=tmp_path)
    try:
        stdio.initialize()
        status = stdio.call("status", {})
        assert status["structuredContent"]["totalDocuments"] == 1
        shown["mcp status"] = json.dumps(status)
    finally:
        stdio.close()
    assert stdio.process.stderr is not None
    shown["mcp stderr"] = stdio.process.stderr.read().decode()

    server = HttpServer(["mcp", "--http", "--port", "0"], env, cwd=tmp_path).start()
    try:
        shown["http health"] = server.request("GET", "/health").text
        called = server.modern("tools/call", {"name": "status", "arguments": {}}, "status")
        assert called.status == 200
        shown["http status"] = called.text
    finally:
        server.stop()
    shown["http log"] = "\n".join(server.log)

    leaks = {label: text for label, text in shown.items() if password in text or SECRET in text}
    assert leaks == {}
