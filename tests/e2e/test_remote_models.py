"""Remote models end to end: real `qmd` processes against a real `llama_cpp.server` on loopback
(scripts/model_server.py), with the in-test shim (tests/remote_servers.py) injecting faults.

* Remote and in-process embeddings of the same GGUF give the same `vsearch` and `query` top
  results; every role remote (rerank and expansion included) answers `query`, and its
  answers land in `llm_cache`.
* Faults: the server killed mid-embed (a rerun finishes; only complete vector sets exist),
  429 with Retry-After (waited for, nothing lost; a wait past the timeout fails at once),
  a wrong key, a wrong model name, answers slower than the timeout, nothing listening. Each
  is `model-unavailable` naming the URL and the reason, never the key, and never a hang.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.models.remote import RemoteEmbedder
from domain.errors import MODEL_UNAVAILABLE, QmdError
from scripts.model_server import CHAT_ALIAS, EMBED_ALIAS, ModelServer, free_port, start_server
from tests.e2e.conftest import Qmd, make_qmd
from tests.mcp_harness import StdioServer
from tests.model_fakes import prepared_model
from tests.remote_servers import Shim, model_server, shim, start_shim

pytestmark = pytest.mark.models
__all__ = ["model_server", "shim"]  # session fixtures, imported for pytest to find

SECRET = "sk-test-SECRET-4f9a7c1e2b"
QUERY = "throttling"  # in no fixture document: only meaning finds the rate-limits page


def embed_path() -> str:
    return str(prepared_model("all-MiniLM-L6-v2-f16.gguf"))


def json_results(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert done.returncode == 0, (done.stdout, done.stderr)
    data = json.loads(done.stdout)
    return list(data if isinstance(data, list) else data.get("results", []))


def top_files(results: list[dict[str, object]], n: int = 5) -> list[object]:
    return [r.get("file") for r in results[:n]]


def vector_sets(db: Path) -> tuple[dict[str, int], int]:
    """({hash: chunk rows} of complete sets, number of incomplete sets)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT hash, COUNT(*), MAX(total_chunks) FROM content_vectors GROUP BY hash"
        ).fetchall()
    complete = {str(h): int(c) for h, c, total in rows if c == total}
    return complete, len(rows) - len(complete)


def local_env(**extra: str) -> dict[str, str]:
    return {"QMD_EMBED_MODEL": embed_path(), "QMD_OFFLINE": "1", **extra}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Qmd:
    """The handbook indexed (no vectors); copied per test that embeds."""
    qmd = make_qmd(tmp_path_factory.mktemp("remote-e2e"))
    qmd.ok("collection", "add", str(qmd.corpus), "--name", "handbook")
    return qmd


def clone(source: Qmd, target: Path) -> Qmd:
    """A copy of an index (database and config) over the same corpus."""
    import shutil

    shutil.copytree(source.root / "home", target / "home")
    shutil.copytree(source.config_dir, target / "config")
    shutil.copy2(source.db, target / "index.sqlite")
    return Qmd(target, source.corpus)


# ------------------------------------------------------------------ same results as in-process


def test_remote_embeddings_rank_as_in_process(
    indexed: Qmd, model_server: ModelServer, tmp_path: Path
) -> None:
    local = clone(indexed, tmp_path / "local")
    remote = clone(indexed, tmp_path / "remote")
    remote_env = {"QMD_EMBED_MODEL": model_server.reference(EMBED_ALIAS), "QMD_OFFLINE": "1"}

    # A remote server does not say how many tokens its model reads, so remote chunks keep the
    # fixed 900-token size; the in-process run uses the same size for a like-for-like index.
    assert local.run("embed", **local_env(QMD_FIT_CHUNKS="0")).returncode == 0
    done = remote.run("embed", **remote_env)
    assert done.returncode == 0, done.stderr
    assert "model openai:minilm" in done.stdout  # stored without the server's address
    assert vector_sets(local.db)[0] == vector_sets(remote.db)[0]  # same chunks

    for command in (("vsearch", QUERY), ("query", f"{QUERY} checkpoint")):
        want = json_results(local.run(*command, "--json", "-n", "5", **local_env()))
        got = json_results(remote.run(*command, "--json", "-n", "5", **remote_env))
        assert top_files(got) == top_files(want), command
        assert [r["score"] for r in got] == pytest.approx([r["score"] for r in want], abs=0.01)
    status = remote.run("status", **remote_env)
    assert "Vectors:" in status.stdout and "need embedding" not in status.stdout, status.stdout


def test_every_role_remote_answers_query_and_caches(
    indexed: Qmd, model_server: ModelServer, tmp_path: Path
) -> None:
    qmd = clone(indexed, tmp_path / "all")
    env = {
        "QMD_EMBED_MODEL": model_server.reference(EMBED_ALIAS),
        "QMD_RERANK_MODEL": model_server.reference(CHAT_ALIAS, "rerank=chat"),
        "QMD_GENERATE_MODEL": model_server.reference(CHAT_ALIAS),
        "QMD_EXPAND_MAX_TOKENS": "40",
    }
    assert qmd.run("embed", **env).returncode == 0
    first = qmd.run("query", "rate limits", "--json", "-n", "3", "-C", "4", timeout=300, **env)
    results = json_results(first)
    assert results, first.stderr
    assert "not available" not in first.stderr  # no stage degraded: all three answered
    with sqlite3.connect(qmd.db) as conn:
        cached = conn.execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0]
    assert cached >= 2  # the expansion and at least one rerank score
    again = qmd.run("query", "rate limits", "--json", "-n", "3", "-C", "4", timeout=300, **env)
    assert top_files(json_results(again)) == top_files(results)  # served from the cache


# ------------------------------------------------------------------ faults


@pytest.fixture
def own_server() -> Iterator[ModelServer]:
    """A server this test may kill (embeddings only)."""
    prepared_model("all-MiniLM-L6-v2-f16.gguf")
    server = start_server(with_chat=False, threads=2)
    try:
        yield server
    finally:
        server.stop()


def test_server_killed_mid_embed_then_rerun_completes(
    indexed: Qmd, own_server: ModelServer, tmp_path: Path
) -> None:
    slow = start_shim(own_server)
    try:
        slow.delay = 0.15  # about 100 requests at one input each: long enough to kill midway
        qmd = clone(indexed, tmp_path / "killed")
        env = {
            "QMD_EMBED_MODEL": f"openai:{EMBED_ALIAS}@{slow.v1}?batch=1&concurrency=1&retries=2",
            "QMD_OFFLINE": "1",
        }
        process = subprocess.Popen(
            [*qmd_cmd(), "embed", "--max-docs-per-batch", "2"],
            env=qmd.env(**env),
            cwd=qmd.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(vector_sets(qmd.db)[0]) < 3:
            time.sleep(0.2)
        own_server.kill()
        stdout, stderr = process.communicate(timeout=60)
        assert process.returncode == 1, (stdout, stderr)
        assert "is not available" in stderr and slow.v1 in stderr, stderr
        complete, incomplete = vector_sets(qmd.db)
        assert incomplete == 0
        assert 3 <= len(complete) < 25

        restarted = start_server(with_chat=False, threads=2)
        try:
            slow.upstream_port = restarted.port
            slow.delay = 0.0
            rerun = qmd.run("embed", **env)
            assert rerun.returncode == 0, rerun.stderr
            # Nothing lost or doubled: the same vector sets as an uninterrupted run.
            clean = clone(indexed, tmp_path / "clean")
            assert clean.run("embed", **env).returncode == 0
            assert vector_sets(qmd.db) == vector_sets(clean.db)
            status = qmd.run("status", **env).stdout
            assert "Vectors:" in status and "need embedding" not in status, status
        finally:
            restarted.stop()
    finally:
        slow.stop()


def test_429_with_retry_after_is_waited_for_and_nothing_is_lost(
    indexed: Qmd, shim: Shim, tmp_path: Path
) -> None:
    shim.reset()
    qmd = clone(indexed, tmp_path / "limited")
    env = {"QMD_EMBED_MODEL": f"openai:{EMBED_ALIAS}@{shim.v1}", "QMD_OFFLINE": "1"}
    shim.fail_next(2, 429, "1")
    started = time.monotonic()
    done = qmd.run("embed", **env)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started >= 2.0  # both Retry-After waits were honoured
    statuses = [status for _, _, status in shim.requests]
    assert statuses[:3] == [429, 429, 200]
    gap = shim.requests[1][0] - shim.requests[0][0]
    assert gap >= 0.95
    clean = clone(indexed, tmp_path / "unlimited")
    assert clean.run("embed", **env).returncode == 0
    assert vector_sets(qmd.db) == vector_sets(clean.db)


def test_retry_after_longer_than_the_timeout_fails_at_once(shim: Shim) -> None:
    shim.reset()
    shim.fail_next(1, 429, "120")
    embedder = RemoteEmbedder(f"openai:{EMBED_ALIAS}@{shim.v1}?timeout=5", env={})
    started = time.monotonic()
    with pytest.raises(QmdError) as caught:
        embedder.embed_queries(["cats"])
    assert time.monotonic() - started < 5
    assert caught.value.code == MODEL_UNAVAILABLE
    assert "HTTP 429" in caught.value.message and "120 s" in caught.value.message
    assert shim.v1 in caught.value.message


def test_wrong_key_is_refused_without_showing_the_key(indexed: Qmd, tmp_path: Path) -> None:
    key_file = tmp_path / "server.key"
    key_file.write_text("right-key-9b8e7d6c\n")
    server = start_server(with_chat=False, threads=2, api_key="right-key-9b8e7d6c")
    try:
        qmd = clone(indexed, tmp_path / "keys")
        reference = server.reference(EMBED_ALIAS)
        wrong = {"QMD_EMBED_MODEL": reference, "QMD_EMBED_API_KEY": SECRET, "QMD_OFFLINE": "1"}
        right = {
            "QMD_EMBED_MODEL": reference,
            "QMD_EMBED_API_KEY_FILE": str(key_file),
            "QMD_OFFLINE": "1",
        }
        embed = qmd.run("embed", **wrong)
        assert embed.returncode == 1
        assert "HTTP 401" in embed.stderr and "QMD_EMBED_API_KEY" in embed.stderr
        assert server.base_url in embed.stderr
        doctor = qmd.run("doctor", **wrong)
        assert "401" in doctor.stdout and doctor.returncode == 1, doctor.stdout
        # The right key, from a key file, works.
        assert qmd.run("embed", **right).returncode == 0
        assert json_results(qmd.run("vsearch", QUERY, "--json", **right))
        healthy = qmd.run("doctor", **right)
        assert "key from QMD_EMBED_API_KEY_FILE" in healthy.stdout, healthy.stdout
        assert "384 dimensions" in healthy.stdout
        # With vectors in place, a wrong key fails vsearch and degrades query to BM25.
        vsearch = qmd.run("vsearch", QUERY, **wrong)
        assert vsearch.returncode == 1 and "HTTP 401" in vsearch.stderr
        # `query` degrades to BM25, as with a local model that cannot load (CLI and the spec
        # MCP surface).
        failed = qmd.run("query", "rate limits", "--json", **wrong)
        assert json_results(failed)
        mcp = StdioServer(qmd.env(**wrong))
        try:
            mcp.initialize()
            answer = mcp.call("query", {"query": "rate limits", "limit": 3}, timeout=120)
        finally:
            mcp.kill()
        assert not answer.get("isError"), answer
        assert answer["structuredContent"]["results"], answer
        for output in (embed, doctor, healthy, vsearch, failed):
            text = output.stdout + output.stderr
            assert SECRET not in text and "right-key" not in text
        assert b"right-key" not in qmd.db.read_bytes()
        assert SECRET.encode() not in qmd.db.read_bytes()
    finally:
        server.stop()


def test_wrong_model_name_is_reported_with_what_the_server_serves(
    model_server: ModelServer,
) -> None:
    embedder = RemoteEmbedder(model_server.reference("no-such-model"), env={})
    with pytest.raises(QmdError) as caught:
        embedder.embed_queries(["cats"])
    assert caught.value.code == MODEL_UNAVAILABLE
    message = caught.value.message
    assert "'no-such-model'" in message and EMBED_ALIAS in message
    assert model_server.base_url in message


def test_answers_slower_than_the_timeout_fail_within_it(shim: Shim) -> None:
    shim.reset()
    shim.delay = 3.0
    try:
        embedder = RemoteEmbedder(f"openai:{EMBED_ALIAS}@{shim.v1}?timeout=1", env={})
        started = time.monotonic()
        with pytest.raises(QmdError) as caught:
            embedder.embed_queries(["cats"])
        assert time.monotonic() - started < 2.5  # one timeout, not retried
    finally:
        shim.delay = 0.0
    assert caught.value.code == MODEL_UNAVAILABLE
    assert "within 1 s" in caught.value.message and shim.v1 in caught.value.message


def test_nothing_listening_fails_after_bounded_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    embedder = RemoteEmbedder(f"openai:{EMBED_ALIAS}@{url}", env={})
    started = time.monotonic()
    with pytest.raises(QmdError) as caught:
        embedder.embed_queries(["cats"])
    assert time.monotonic() - started < 10
    assert "connection refused" in caught.value.message and url in caught.value.message


def qmd_cmd() -> list[str]:
    from tests.e2e.conftest import qmd_command

    return qmd_command()
