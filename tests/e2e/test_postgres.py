"""The index in PostgreSQL, end to end: `qmd index copy` both ways, and many processes on one
database (two HTTP servers reading while `qmd update` writes)."""

from __future__ import annotations

import hashlib
import http.client
import json
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.postgres.store import PostgresIndex
from adapters.sqlite.chunks import SqliteChunkIndex
from adapters.sqlite.extraction import SqliteExtractionLedger
from adapters.sqlite.memory import SqliteMemoryRows
from adapters.sqlite.store import SqliteIndex
from domain.extraction import CachedExtraction, ExtractionState
from domain.ports import DocumentCut, ExtractionLedger
from domain.sections import split_sections
from tests.http_harness import ACCEPT_BOTH, REPO, HttpServer, send
from tests.mcp_harness import build_fixture_index, fixture_env
from tests.postgres_server import drop_schema, fresh_schema_url

pytestmark = pytest.mark.postgres

HEADERS = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}
T0 = "2025-01-01T00:00:00.000Z"


@pytest.fixture
def pg_url() -> Iterator[str]:
    url, schema = fresh_schema_url()
    try:
        yield url
    finally:
        drop_schema(schema)


def qmd(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        env=env,
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _snapshot(index: SqliteIndex | PostgresIndex) -> dict[str, Any]:
    docs = index.documents()
    vector_hits = index.search_vectors([1.0, 0.0, 0.5], 50, None)
    return {
        "documents": sorted((m.collection, m.path, m.title, m.hash) for m in docs),
        "bodies": sorted(hashlib.sha256(index.body(m.hash).encode()).hexdigest() for m in docs),
        "collections": [
            (c.name, c.pattern, c.include_by_default) for c in index.list_collections()
        ],
        "context": index.get_global_context(),
        "vectors": index.vector_count(),
        "nearest": [(h.document.meta.path, round(h.distance, 5)) for h in vector_hits],
        "metadata": sorted(index.active_metadata(None)),
        "extraction": _ledger(index).extraction_states(),
        "cached": _ledger(index).cached_extraction("h-src"),
        "memory": sorted(_memory(index).memory_files()),
        "topics": _memory(index).memory_topics(),
        "chunks": sorted(
            (row.id, row.path, row.seq, row.text)
            for m in docs
            for row in _chunks(index).document_chunks(m.collection, m.path)
        ),
        "namespaces": _chunks(index).namespace_ids(["docs", "notes"]),
        "summaries": _chunks(index).summarized_ids(),
    }


def _chunks(index: SqliteIndex | PostgresIndex) -> SqliteChunkIndex | PostgresIndex:
    if isinstance(index, SqliteIndex):
        return SqliteChunkIndex(index.connection)
    return index


def _memory(index: SqliteIndex | PostgresIndex) -> SqliteMemoryRows | PostgresIndex:
    if isinstance(index, SqliteIndex):
        return SqliteMemoryRows(index.connection)
    return index


def _ledger(index: SqliteIndex | PostgresIndex) -> ExtractionLedger:
    if isinstance(index, SqliteIndex):
        return SqliteExtractionLedger(index.connection)
    return index


def test_index_copy_sqlite_to_postgres_and_back(tmp_path: Path, pg_url: str) -> None:
    _, env = build_fixture_index(tmp_path)
    source = tmp_path / "index.sqlite"
    index = SqliteIndex.open(source)
    try:
        for n, meta in enumerate(index.documents()):
            chunks = [(0, 0, [1.0, 0.1 * n, 0.5]), (1, 40, [0.2, 1.0, 0.1 * n])]
            index.store_chunk_vectors(meta.hash, chunks, "m", "fp", T0)
            index.put_metadata(meta.collection, meta.path, {"n": n, "tags": ("a", f"t{n}")})
        ledger = _ledger(index)
        ledger.remember_extraction(CachedExtraction("h-src", "ok", text_hash="t", pages=2))
        ledger.record_states("docs", [ExtractionState("docs", "a.pdf", "ok", pages=2)])
        rows = _memory(index)
        rows.put_memory_topic("t", struct.pack("<2f", 1.0, 0.5))
        rows.put_memory_records([("qa-1", "qa", "t", "qa/t/qa-1.md", "fh", "{}", b"\x00" * 8)])
        chunks = _chunks(index)
        chunks.prune()
        cuts = [
            DocumentCut(m.id, m.hash, split_sections(index.body(m.hash))) for m in index.documents()
        ]
        chunks.replace_chunks(cuts)
        chunks.replace_chunks(cuts[:1])  # ids of the first document's old rows are spent
        head = index.documents()[0]
        spent = max(row.id for row in chunks.document_chunks(head.collection, head.path))
        chunks.replace_chunks([DocumentCut(head.id, head.hash, [])])  # the highest ids go too
        chunks.put_summary("s1", "{}", T0)
        before = _snapshot(index)
    finally:
        index.close()
    assert before["vectors"] > 0 and before["documents"]
    assert sum(1 for _, fields in before["metadata"] if fields) == len(before["documents"])
    assert before["extraction"] and before["cached"] is not None
    assert before["memory"] and before["topics"] and before["chunks"] and before["summaries"]

    done = qmd(env, "index", "copy", str(source), pg_url)
    assert done.returncode == 0, done.stderr
    assert "Verified:" in done.stdout
    assert f"{len(before['documents'])} documents" in done.stdout
    pg = PostgresIndex.open(pg_url)
    try:
        assert _snapshot(pg) == before
    finally:
        pg.close()
    # search through a real `qmd` finds the same documents on both backends
    on_sqlite = qmd(env, "search", "pagination", "--json")
    on_pg = qmd({**env, "INDEX_PATH": pg_url}, "search", "pagination", "--json")
    assert on_sqlite.returncode == 0 and on_pg.returncode == 0, on_pg.stderr
    files = {r["file"] for r in json.loads(on_sqlite.stdout)}
    assert files and files == {r["file"] for r in json.loads(on_pg.stdout)}

    back = tmp_path / "back.sqlite"
    done = qmd(env, "index", "copy", pg_url, str(back))
    assert done.returncode == 0, done.stderr
    copied = SqliteIndex.open(back)
    try:
        assert _snapshot(copied) == before
        # chunk ids are never reused, across copies too: new rows get ids past every spent one
        assert spent > max(row[0] for row in before["chunks"])
        first = copied.documents()[0]
        _chunks(copied).replace_chunks([DocumentCut(first.id, first.hash, split_sections("x"))])
        fresh = _chunks(copied).document_chunks(first.collection, first.path)
        assert fresh and all(row.id > spent for row in fresh)
    finally:
        copied.close()
    pg = PostgresIndex.open(pg_url)
    try:
        first = pg.documents()[0]
        pg.replace_chunks([DocumentCut(first.id, first.hash, split_sections("x"))])
        fresh = pg.document_chunks(first.collection, first.path)
        assert fresh and all(row.id > spent for row in fresh)
    finally:
        pg.close()
    # a non-empty destination is refused, and left as it was
    again = qmd(env, "index", "copy", str(source), pg_url)
    assert again.returncode != 0
    assert "not empty" in again.stderr


def _mcp(connection: http.client.HTTPConnection, i: int, tool: str, args: Any) -> Any:
    message = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args},
    }
    reply = send(connection, "POST", "/mcp", message, HEADERS)
    events = reply.events()
    if reply.status != 200 or len(events) != 1 or "result" not in events[0]:
        raise AssertionError(f"{tool}: {reply.status} {reply.text[:300]}")
    return events[0]["result"]


def test_two_http_servers_and_an_indexer_share_one_database(tmp_path: Path, pg_url: str) -> None:
    env = {**fixture_env(tmp_path), "INDEX_PATH": pg_url}
    (tmp_path / "home").mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "seed.md").write_text("# Seed\n\nThe first note.\n", encoding="utf-8")
    done = qmd(env, "collection", "add", str(notes), "--name", "notes")
    assert done.returncode == 0, done.stderr
    servers = [
        HttpServer(["mcp", "--http", "--port", "0"], env).start(),
        HttpServer(["mcp", "--http", "--port", "0"], env).start(),
    ]
    errors: list[str] = []
    reads = 0
    lock = threading.Lock()
    stop = threading.Event()

    def reader(server: HttpServer, worker: int) -> None:
        nonlocal reads
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        n = 0
        while not stop.is_set() or n < 10:
            tool, args = [
                ("search", {"query": "note"}),
                ("get", {"file": "notes/seed.md"}),
                ("status", {}),
            ][(worker + n) % 3]
            try:
                result = _mcp(connection, n, tool, args)
                problem = f"{tool}: isError {result}" if result.get("isError") else None
            except Exception as error:
                problem = f"{tool}: {error!r}"
            n += 1
            with lock:
                reads += 1
                if problem:
                    errors.append(problem)

    threads = [
        threading.Thread(target=reader, args=(server, w)) for server in servers for w in range(3)
    ]
    written: list[str] = []
    try:
        for thread in threads:
            thread.start()
        for round_ in range(2):
            for i in range(15):
                name = f"round{round_}-note{i}.md"
                (notes / name).write_text(
                    f"# Note {round_}.{i}\n\nWritten in round {round_}: marker{round_}x{i}.\n",
                    encoding="utf-8",
                )
                written.append(name)
            # two indexers at once: the advisory lock makes the second wait, not corrupt
            first = subprocess.Popen(
                [sys.executable, "-m", "adapters.cli", "update"],
                env=env,
                cwd=str(REPO),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            second = qmd(env, "update")
            _, err = first.communicate(timeout=180)
            assert first.returncode == 0, err
            assert second.returncode == 0, second.stderr
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    try:
        assert errors == []
        assert reads >= 60
        for server in servers:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            for n, name in enumerate(written):
                result = _mcp(connection, n, "get", {"file": f"notes/{name}"})
                assert not result.get("isError"), result
            round_, i = 1, 14
            found = _mcp(connection, 1000, "search", {"query": f"marker{round_}x{i}"})
            files = [r["file"] for r in found["structuredContent"]["results"]]
            assert files == [f"notes/round{round_}-note{i}.md"]
            status = _mcp(connection, 1001, "status", {})
            assert status["structuredContent"]["totalDocuments"] == len(written) + 1
    finally:
        for server in servers:
            server.stop()
    index = PostgresIndex.open(pg_url)
    try:
        paths = [m.path for m in index.documents("notes")]
        assert sorted(paths) == sorted([*written, "seed.md"])  # none lost, none doubled
    finally:
        index.close()


def test_extraction_and_metadata_filters_work_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    """PDF, DOCX and HTML files are extracted into a PostgreSQL index (the ledger's tables
    there), failures are reported by `status`, and an extractor's author is filterable."""
    from tests.e2e.conftest import make_qmd
    from tooling.docgen import build_fixture

    qmd = make_qmd(tmp_path)
    build_fixture(qmd.root / "docs")

    def run(*args: str) -> str:
        done = qmd.run(*args, INDEX_PATH=pg_url)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout + done.stderr

    mask = "**/*.{md,pdf,docx,html}"
    added = run("collection", "add", str(qmd.root / "docs"), "--name", "docs", "--mask", mask)
    assert "broken.pdf" in added and "corrupt" in added, added
    assert "docs/survey.pdf" in run("search", "albatross", "--json")
    assert "docs/guide.html" in run("search", "lighthouse", "--json")
    status = run("status")
    assert "zip-bomb" in status and "docs/survey.pdf" in status, status
    by_author = '{"key": "author", "operator": "eq", "value": "Pat Pdf"}'
    assert "docs/survey.pdf" in run("search", "albatross", "--json", "--filter", by_author)
    other = by_author.replace("Pat Pdf", "Dana Docx")
    assert "docs/survey.pdf" not in run("search", "albatross", "--json", "--filter", other)
    pg = PostgresIndex.open(pg_url)
    try:
        failed = {s.path: s.reason for s in pg.extraction_states("docs") if s.status == "failed"}
        assert failed == {"bomb.docx": "zip-bomb", "broken.pdf": "corrupt"}
    finally:
        pg.close()
