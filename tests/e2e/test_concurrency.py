"""Concurrency: `qmd update` rewriting the index while `qmd mcp` servers answer, two updates
at once, and an oversized stdio line, all with real processes.

The promises (docs/reliability.md): no `database is locked` (or any other error) reaches a
client, and no document is lost or duplicated. Each test prints its counts (`-s`).
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_crash_consistency import check_index, indexed_paths, mutate, write_doc
from tests.figures import report
from tests.mcp_harness import REPO, StdioServer, fixture_env

UPDATES_WHILE_SERVING = 12
MIN_REQUESTS = 500
UPDATE_PAIRS = 6


def _qmd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture
def corpus_env(tmp_path: Path) -> tuple[Path, dict[str, str], random.Random]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rng = random.Random(41)
    for i in range(300):
        write_doc(corpus, rng, f"doc-{i:03d}.md", rng.randint(50, 500))
    env = {**fixture_env(tmp_path), "PYTHONPATH": str(REPO)}
    added = _qmd(env, "collection", "add", str(corpus), "--name", "c")
    assert added.returncode == 0, added.stderr
    return corpus, env, rng


def _client(server: StdioServer, surface: str, stop: threading.Event, log: dict[str, Any]) -> None:
    """Search, get, multi_get and status in a loop; every reply must be a success."""
    server.initialize()
    words = ["alpha", "vector", "journal", "commit", "zulu", "lock writer"]
    turn = 0
    while not stop.is_set() or turn < 20:
        turn += 1
        word = words[turn % len(words)]
        kind = turn % 4
        if kind == 0:
            args: dict[str, Any] = (
                {"query": word}
                if surface == "spec"
                else {"searches": [{"type": "lex", "query": word}], "rerank": False}
            )
            tool = "search" if surface == "spec" else "query"
        elif kind == 1:
            tool, args = "get", {"file": f"c/doc-{turn % 300:03d}.md"}
        elif kind == 2:
            pattern = f"doc-{turn % 3}{turn % 10}*.md"
            tool, args = "multi_get", {"pattern": pattern, "maxBytes": 2000}
        else:
            tool, args = "status", {}
        try:
            reply = server.request("tools/call", {"name": tool, "arguments": args}, timeout=60)
        except Exception as error:  # a dead server or a timeout is a failure too
            log["errors"].append(f"{surface} {tool}: {error!r}")
            return
        text = str(reply)
        log["requests"] += 1
        if "locked" in text or "busy" in text.lower():
            log["errors"].append(f"{surface} {tool}: {text[:300]}")
        elif "error" in reply:
            log["errors"].append(f"{surface} {tool}: {reply['error']}")
        elif reply["result"].get("isError"):
            content = reply["result"]["content"][0]["text"]
            # a document removed by the update in between is a correct answer
            if tool != "get" or "not found" not in content.lower():
                log["errors"].append(f"{surface} {tool}: {content[:300]}")


def test_update_rewrites_the_index_while_servers_answer(
    corpus_env: tuple[Path, dict[str, str], random.Random],
) -> None:
    corpus, env, rng = corpus_env
    servers = [
        (StdioServer(env), "spec"),
        (StdioServer(env, "--compat", "2.8.3"), "compat"),
        (StdioServer(env), "spec"),
    ]
    stop = threading.Event()
    log: dict[str, Any] = {"requests": 0, "errors": []}
    threads = [
        threading.Thread(target=_client, args=(server, surface, stop, log), daemon=True)
        for server, surface in servers
    ]
    try:
        for thread in threads:
            thread.start()
        updates = 0
        started = time.monotonic()
        while updates < UPDATES_WHILE_SERVING or (
            log["requests"] < MIN_REQUESTS and time.monotonic() - started < 300
        ):
            mutate(corpus, rng, 60, (50, 500))
            done = _qmd(env, "update")
            assert done.returncode == 0, done.stderr
            assert "locked" not in done.stderr
            updates += 1
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        assert not log["errors"], log["errors"][:5]
        assert log["requests"] >= MIN_REQUESTS, log["requests"]
        for server, _ in servers:
            assert server.process.poll() is None
    finally:
        stop.set()
        for server, _ in servers:
            server.kill()
    check_index(env["INDEX_PATH"])
    assert indexed_paths(env["INDEX_PATH"], "c") == {p.name for p in corpus.glob("*.md")}
    report(
        f"\n{log['requests']} MCP requests on {len(servers)} servers (spec and compat) during "
        f"{updates} updates: 0 errors, 0 'database is locked'; index matches the folder"
    )


def test_two_updates_at_once_lose_and_duplicate_nothing(
    corpus_env: tuple[Path, dict[str, str], random.Random],
) -> None:
    corpus, env, rng = corpus_env
    second = corpus.parent / "second"
    second.mkdir()
    for i in range(100):
        write_doc(second, rng, f"s-{i:03d}.md", rng.randint(50, 300))
    assert _qmd(env, "collection", "add", str(second), "--name", "s").returncode == 0
    # A 50 ms busy timeout: without the update lock the second writer would fail at once;
    # the promise must not depend on an update being shorter than the timeout.
    env = {**env, "QMD_SQLITE_BUSY_TIMEOUT": "50"}
    for _ in range(UPDATE_PAIRS):
        mutate(corpus, rng, 80, (50, 500))
        mutate(second, rng, 20, (50, 300))
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "adapters.cli.main", "update"],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for process in processes:
            out, err = process.communicate(timeout=600)
            assert process.returncode == 0, err
            assert "locked" not in out + err
        check_index(env["INDEX_PATH"])
        assert indexed_paths(env["INDEX_PATH"], "c") == {p.name for p in corpus.glob("*.md")}
        assert indexed_paths(env["INDEX_PATH"], "s") == {p.name for p in second.glob("*.md")}
    total = len(list(corpus.glob("*.md"))) + len(list(second.glob("*.md")))
    report(
        f"\n{UPDATE_PAIRS} pairs of concurrent updates over 2 collections: both exit 0 each "
        f"time, no 'database is locked', {total} documents, none lost or duplicated"
    )


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def test_a_70_mib_line_is_refused_and_the_next_request_answered(
    corpus_env: tuple[Path, dict[str, str], random.Random],
) -> None:
    _, env, _ = corpus_env
    server = StdioServer(env)
    try:
        server.initialize()
        chunk = b"y" * (1 << 20)
        for _ in range(70):
            server.send_raw(chunk)
        server.send_raw(b"\n")
        reply = server.receive(timeout=60)
        assert reply["error"]["code"] == -32600 and reply["id"] is None
        assert server.request("ping")["result"] == {}
        peak = _peak_rss_kib(server.process.pid)
        assert peak < 200 * 1024, f"peak RSS {peak} KiB"
        report(f"\n70 MiB line refused with -32600, next request answered, peak RSS {peak} KiB")
    finally:
        server.kill()


@pytest.mark.models
def test_updates_while_embed_runs_leave_nothing_torn(tmp_path: Path) -> None:
    """`qmd embed` (MiniLM, two documents per batch) while updates edit what it embeds: it
    ends with success or 'Embedding incomplete', never an internal error or a lock error,
    and the next embed finishes the job."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rng = random.Random(43)
    for i in range(24):
        write_doc(corpus, rng, f"doc-{i:03d}.md", rng.randint(50, 200))
    env = {
        **fixture_env(tmp_path),
        "PYTHONPATH": str(REPO),
        "QMD_EMBED_MODEL": str(REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"),
    }
    assert _qmd(env, "collection", "add", str(corpus), "--name", "c").returncode == 0
    embed = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli.main", "embed", "--max-docs-per-batch", "2"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    updates = 0
    while embed.poll() is None and updates < 3:
        time.sleep(1.0)
        mutate(corpus, rng, 6, (50, 200))
        done = _qmd(env, "update")
        assert done.returncode == 0 and "locked" not in done.stderr, done.stderr
        updates += 1
    _, err = embed.communicate(timeout=900)
    assert updates > 0, "embed finished before any update could run beside it"
    assert "locked" not in err and "internal error" not in err, err
    assert embed.returncode == 0 or "Embedding incomplete" in err, err
    check_index(env["INDEX_PATH"])
    final = _qmd(env, "embed")
    assert final.returncode == 0, final.stderr
    check_index(env["INDEX_PATH"])
    report(
        f"\nembed while {updates} updates edited its documents: exit {embed.returncode} "
        f"({err.strip().splitlines()[-1] if err.strip() else 'no message'}); "
        "the next embed completed"
    )
