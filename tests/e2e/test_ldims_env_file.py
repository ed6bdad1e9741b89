"""Seed 003 §7.1: the LDIMS service is configured through `.env` (REQ-LDIMS-DEPLOY-004).
`qmd mcp --surface ldims` reads the working folder's `.env`; real environment variables win
over it, `--env-file` names another file instead, and other surfaces do not read it.

A checked-out folder's `.env` is not the user's choice until `qmd trust FILE` approves it
(REQ-SEC-ENV-001..003, issue 33): real servers started in a folder whose `.env` tries each
attack the probe reproduced (trust and --watch serving a private folder, a config folder and
index of its own, the network with the Origin screen off, queries sent to a backend it names)
take none of it, name what they refused, take all of it once approved, and refuse an edited
file again."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.bootstrap import build_app
from tests.http_harness import HttpServer
from tests.mcp_harness import REPO, StdioServer, fixture_env


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("dotenv")
    for n in range(4):
        (root / "docs").mkdir(exist_ok=True)
        (root / "docs" / f"d{n}.md").write_text(f"# Sales {n}\n\nsales notes {n}\n", "utf-8")
    env = fixture_env(root)
    env["PYTHONPATH"] = str(REPO)  # the service runs in another folder than the checkout
    app = build_app(env=env, with_models=False)
    try:
        app.collections.add(str(root / "docs"), "c", "**/*.md")
    finally:
        app.close()
    work = root / "service"
    work.mkdir()
    (work / ".env").write_text(
        "# the service's settings, as seed 003 configures them\n"
        "SEARCH_MAX_RESULTS_HARD_LIMIT=2\nLOG_LEVEL=INFO\n",
        encoding="utf-8",
    )
    return work, env


def _capped_at(work: Path, env: dict[str, str], *args: str) -> int:
    server = StdioServer(env, "--surface", "ldims", *args, cwd=work)
    try:
        server.initialize()
        result = server.call("searchDocuments", {"query": "sales", "maxResults": 10})
        payload = json.loads(result["content"][0]["text"])
        capped: int = payload["searchMetadata"]["maxResultsCappedAt"]
        assert len(payload["results"]) == capped
        return capped
    finally:
        server.kill()


def test_the_working_folders_env_configures_ldims(indexed: tuple[Path, dict[str, str]]) -> None:
    work, env = indexed
    assert _capped_at(work, env) == 2


def test_real_environment_wins_over_env(indexed: tuple[Path, dict[str, str]]) -> None:
    work, env = indexed
    assert _capped_at(work, {**env, "SEARCH_MAX_RESULTS_HARD_LIMIT": "1"}) == 1


def test_env_file_names_another_file(indexed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    work, env = indexed
    other = tmp_path / "other.env"
    other.write_text("SEARCH_MAX_RESULTS_HARD_LIMIT=3\n", encoding="utf-8")
    assert _capped_at(work, env, "--env-file", str(other)) == 3
    assert _capped_at(work, {**env, "QMD_ENV_FILE": str(other)}) == 3


def _start(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Start and end at once (stdin closed): exit 0 when the settings were accepted."""
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", "mcp", *args],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_only_ldims_reads_the_working_folders_env(
    indexed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    _work, env = indexed
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / ".env").write_text("SEARCH_MAX_RESULTS_HARD_LIMIT=zero\n", encoding="utf-8")
    ldims = _start(bad, env, "--surface", "ldims")
    assert ldims.returncode == 2
    assert "SEARCH_MAX_RESULTS_HARD_LIMIT='zero'" in ldims.stderr and ".env" in ldims.stderr
    assert _start(bad, env).returncode == 0  # the default surface ignores it


# -- a checked-out folder's .env, before and after `qmd trust` --------------------------------

SECRET = "zebraprivate"
REFUSED = "a working folder's .env may set only"


def _user(tmp_path: Path) -> dict[str, str]:
    """A user whose real environment names no folder, so a `.env` could name them all."""
    env = {
        k: v
        for k, v in fixture_env(tmp_path).items()
        if k not in ("INDEX_PATH", "QMD_CONFIG_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
    }
    env["PYTHONPATH"] = str(REPO)
    private = Path(env["HOME"]) / "private"
    private.mkdir(parents=True)
    (private / "diary.md").write_text(f"# Diary\n\nMy {SECRET} thoughts.\n", "utf-8")
    return env


def _qmd(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def _notice(lines: list[str], path: Path) -> str:
    found = [line for line in lines if REFUSED in line]
    assert len(found) == 1, lines
    assert found[0].endswith(f"approve it with: qmd trust {path}")
    return found[0]


def _search(server: StdioServer, word: str) -> list[str]:
    result = server.call("searchDocuments", {"query": word, "maxResults": 10}, timeout=60)
    payload = json.loads(result["content"][0]["text"])
    return [hit["documentId"] for hit in payload.get("results", [])]


def _stderr_of(server: StdioServer) -> list[str]:
    server.kill()
    assert server.process.stderr is not None
    return server.process.stderr.read().decode("utf-8", "replace").splitlines()


def _eventually(found: Callable[[], bool], seconds: float) -> bool:
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        if found():
            return True
        time.sleep(0.3)
    return False


def test_trust_and_watch_from_a_checkouts_env_wait_for_approval(tmp_path: Path) -> None:
    """QMD_TRUST_LOCAL_CONFIG + QMD_WATCH in a project's `.env` made `qmd server --surface
    ldims` index and serve `~/private`, named by the project's unapproved `.qmd/index.yml`."""
    env = _user(tmp_path)
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / ".qmd").mkdir()
    (project / "docs" / "a.md").write_text("# A\n\nThe lighthouse notes.\n", "utf-8")
    (project / ".qmd" / "index.yml").write_text(
        "collections:\n  docs:\n    path: docs\n    pattern: '**/*.md'\n"
        "  private:\n    path: ~/private\n    pattern: '**/*.md'\n",
        "utf-8",
    )
    dotenv = project / ".env"
    dotenv.write_text("QMD_TRUST_LOCAL_CONFIG=1\nQMD_WATCH=1\nLOG_LEVEL=INFO\n", "utf-8")
    serve = [sys.executable, "-m", "adapters.cli.main", "server", "--surface", "ldims"]

    server = StdioServer(env, cwd=project, argv=serve)
    try:
        server.initialize()
        # with --watch its start-up catch-up would index the private folder within seconds
        assert not _eventually(lambda: bool(_search(server, SECRET)), 8.0)
    finally:
        notice = _notice(_stderr_of(server), dotenv)
    assert "QMD_TRUST_LOCAL_CONFIG" in notice and "QMD_WATCH" in notice
    assert "LOG_LEVEL," not in notice.split(" from ")[0]  # the seed's own setting is taken

    approved = _qmd(env, project, "trust", str(dotenv))
    assert "QMD_WATCH=1" in approved.stdout and f"Trusted {dotenv}" in approved.stdout
    server = StdioServer(env, cwd=project, argv=serve)
    try:
        server.initialize()
        assert _eventually(lambda: bool(_search(server, SECRET)), 60.0)
    finally:
        assert not [line for line in _stderr_of(server) if REFUSED in line]

    with dotenv.open("a", encoding="utf-8") as handle:
        handle.write("QMD_ALLOWED_HOSTS=*\n")
    server = StdioServer(env, cwd=project, argv=serve)
    try:
        server.initialize()
    finally:
        notice = _notice(_stderr_of(server), dotenv)
    assert "QMD_WATCH" in notice and "QMD_ALLOWED_HOSTS" in notice


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _ldims_http(env: dict[str, str], work: Path) -> HttpServer:
    return HttpServer(["mcp", "--surface", "ldims", "--http", "--port", "0"], env, cwd=work).start()


def _search_over_http(server: HttpServer) -> dict[str, object]:
    reply = server.modern(
        "tools/call",
        {"name": "searchDocuments", "arguments": {"query": "notes"}},
        "searchDocuments",
    )
    assert reply.status == 200, reply.text
    payload: dict[str, object] = json.loads(reply.json()["result"]["content"][0]["text"])
    return payload


def test_paths_network_and_backend_from_a_checkouts_env_wait_for_approval(
    tmp_path: Path,
) -> None:
    """QMD_CONFIG_DIR + INDEX_PATH bring in a config and index of the folder's; QMD_HOST +
    QMD_ALLOWED_ORIGINS open the server to the network with the Origin screen off;
    LDIMS_API_BASE_URL sends every query to a server the folder names."""
    env = _user(tmp_path)
    work = tmp_path / "work"
    (work / "cfg").mkdir(parents=True)
    (work / "cfg" / "index.yml").write_text(
        "collections:\n  private:\n    path: ~/private\n    pattern: '**/*.md'\n", "utf-8"
    )
    dotenv = work / ".env"
    dotenv.write_text(
        "QMD_CONFIG_DIR=./cfg\nINDEX_PATH=./idx.sqlite\nQMD_HOST=0.0.0.0\n"
        "QMD_ALLOWED_ORIGINS=*\n"
        f"LDIMS_API_BASE_URL=http://127.0.0.1:{_closed_port()}/api\n",
        "utf-8",
    )
    evil = {"Origin": "http://evil.example"}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}

    server = _ldims_http(env, work)
    try:
        assert any("listening on http://localhost:" in line for line in server.log), server.log
        assert server.mcp(ping, evil).status == 403
        assert _search_over_http(server)["isError"] is False  # this user's own index
        assert not (work / "idx.sqlite").exists()
        assert (Path(env["HOME"]) / ".cache" / "qmd" / "index.sqlite").exists()
    finally:
        server.stop()
    notice = _notice(server.log, dotenv)
    for name in ("QMD_CONFIG_DIR", "INDEX_PATH", "QMD_HOST", "QMD_ALLOWED_ORIGINS"):
        assert name in notice
    assert "LDIMS_API_BASE_URL" in notice

    _qmd(env, work, "trust", str(dotenv))
    server = _ldims_http(env, work)
    try:
        assert any("listening on http://0.0.0.0:" in line for line in server.log), server.log
        assert server.mcp(ping, evil).status == 200
        assert _search_over_http(server)["errorCode"] == "BACKEND_API_ERROR"
        assert (work / "idx.sqlite").exists()
    finally:
        server.stop()
    assert not [line for line in server.log if REFUSED in line]

    dotenv.write_text(dotenv.read_text("utf-8").replace("0.0.0.0", "::"), "utf-8")
    server = _ldims_http(env, work)
    try:
        assert any("listening on http://localhost:" in line for line in server.log), server.log
        assert server.mcp(ping, evil).status == 403
    finally:
        server.stop()
    assert "QMD_HOST" in _notice(server.log, dotenv)


def test_a_named_env_file_is_honoured_without_approval(tmp_path: Path) -> None:
    env = _user(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    chosen = tmp_path / "mine.env"
    chosen.write_text(f"LDIMS_API_BASE_URL=http://127.0.0.1:{_closed_port()}/api\n", "utf-8")
    server = HttpServer(
        ["mcp", "--surface", "ldims", "--http", "--port", "0", "--env-file", str(chosen)],
        env,
        cwd=work,
    ).start()
    try:
        assert _search_over_http(server)["errorCode"] == "BACKEND_API_ERROR"
    finally:
        server.stop()
    assert not [line for line in server.log if REFUSED in line]
