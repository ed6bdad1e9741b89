"""`qmd index copy` in every direction (SQLite -> SQLite, SQLite -> PostgreSQL, PostgreSQL ->
PostgreSQL, PostgreSQL -> SQLite), with every table, empty or not, and a destination that is
complete or untouched (issue 26). Real `qmd` processes; the PostgreSQL of scripts/postgres.sh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from adapters.cli.index_copy import LOCAL_TABLES, TABLES, copy_to
from adapters.postgres.store import PostgresIndex
from adapters.postgres.url import split_schema
from adapters.sqlite import vector_bits
from adapters.sqlite.chunks import SqliteChunkIndex
from adapters.sqlite.dump import DERIVED_TABLES
from adapters.sqlite.dump import OWN_CONFIG_KEYS as LOCAL_CONFIG_KEYS
from adapters.sqlite.extraction import SqliteExtractionLedger
from adapters.sqlite.memory import SqliteMemoryRows
from adapters.sqlite.store import SqliteIndex
from adapters.sqlite.vector_bits import BITS_TABLE
from adapters.storage.registry import open_backend
from domain.extraction import ExtractionState
from domain.ports import DocumentCut
from domain.sections import split_sections
from tests.http_harness import REPO
from tests.mcp_harness import build_fixture_index
from tests.postgres_server import drop_schema, fresh_schema_url

pytestmark = pytest.mark.postgres
T0 = "2025-01-01T00:00:00.000Z"
QUERIES = ("pagination", "rate limits", "authentication token")

# Tables a copy does not carry over row by row: rebuilt on the destination (full text, vector
# storage) or kept by the database itself.
DERIVED = (
    "documents_fts",
    "vectors_vec",
    "sqlite_sequence",
    "fts_stats",
    "fts_lexemes",
    "py_metadata_values",
    "qmd_schema_version",
    *DERIVED_TABLES,
)


def qmd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        env=env,
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def pg_urls() -> Iterator[list[str]]:
    made: list[str] = []
    urls = []
    for _ in range(2):
        url, schema = fresh_schema_url()
        urls.append(url)
        made.append(schema)
    try:
        yield urls
    finally:
        for schema in made:
            drop_schema(schema)


def _local_keys_out(table: str, mark: str = "%s") -> str:
    """store_config's keys each adapter writes for itself are not copied (index_copy)."""
    if table != "store_config":
        return ""
    return f" WHERE key NOT IN ({', '.join([mark] * len(LOCAL_CONFIG_KEYS))})"


def table_counts(location: str) -> dict[str, int]:
    """Rows of every table the index holds (the vectors under "vectors"), read directly."""
    found: dict[str, int] = {}
    if location.startswith("postgresql://"):
        conninfo, schema = split_schema(location)
        with psycopg.connect(conninfo) as conn:
            names = [
                str(row[0])
                for row in conn.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = %s AND table_type = 'BASE TABLE'",
                    (schema,),
                )
            ]
            for name in names:
                row = conn.execute(
                    f'SELECT COUNT(*) FROM "{schema}"."{name}"{_local_keys_out(name)}',
                    LOCAL_CONFIG_KEYS if name == "store_config" else (),
                ).fetchone()
                found[name] = int(row[0]) if row else -1
    else:
        index = SqliteIndex.open(location)
        try:
            raw = index.connection.raw
            names = [
                str(row[0])
                for row in raw.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'documents_fts_%' AND name NOT LIKE 'vectors_vec_%' "
                    f"AND name NOT LIKE '{BITS_TABLE}_%'"
                )
            ]
            for name in names:
                statement = f'SELECT COUNT(*) FROM "{name}"{_local_keys_out(name, "?")}'
                params = LOCAL_CONFIG_KEYS if name == "store_config" else ()
                found[name] = int(raw.execute(statement, params).fetchone()[0])
        finally:
            index.close()
    found["vectors"] = found.pop("vectors_vec", 0)
    # this machine's file stamps are never copied (LOCAL_TABLES)
    return {n: count for n, count in found.items() if n not in DERIVED and n not in LOCAL_TABLES}


def answers(env: dict[str, str], location: str) -> dict[str, Any]:
    """What a real `qmd` answers from the index at `location`: ranked lexical results per
    query, and the vector neighbours of a fixed vector."""
    result: dict[str, Any] = {}
    for query in QUERIES:
        done = qmd({**env, "INDEX_PATH": location}, "search", query, "--json", "-n", "20")
        assert done.returncode == 0, done.stderr
        result[query] = [(hit["file"], hit["title"]) for hit in json.loads(done.stdout)]
    index: SqliteIndex | PostgresIndex = (
        PostgresIndex.open(location)
        if location.startswith("postgresql://")
        else SqliteIndex.open(location)
    )
    try:
        result["nearest"] = [
            (hit.document.meta.path, round(hit.distance, 5))
            for hit in index.search_vectors([1.0, 0.0, 0.5], 50, None)
        ]
    finally:
        index.close()
    return result


def same_answers(a: dict[str, Any], b: dict[str, Any], same_backend: bool) -> None:
    assert a["nearest"] == b["nearest"]
    for query in QUERIES:
        assert a[query], query
        if same_backend:
            assert a[query] == b[query], query
        else:  # BM25 on FTS5 and on tsvector rank close scores differently (docs/postgres.md)
            assert sorted(a[query]) == sorted(b[query]), query


def build_source(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A SQLite index with vectors, metadata, and optional tables present but EMPTY beside
    full ones: extraction_cache (states only), memory_topics (records only), namespaces and
    summaries (chunk rows only)."""
    _, env = build_fixture_index(tmp_path)
    source = tmp_path / "index.sqlite"
    index = SqliteIndex.open(source)
    try:
        for n, meta in enumerate(index.documents()):
            chunks = [(0, 0, [1.0, 0.1 * n, 0.5]), (1, 40, [0.2, 1.0, 0.1 * n])]
            index.store_chunk_vectors(meta.hash, chunks, "m", "fp", T0)
            index.put_metadata(meta.collection, meta.path, {"n": n})
        SqliteExtractionLedger(index.connection).record_states(
            "docs", [ExtractionState("docs", "a.pdf", "ok", pages=2)]
        )
        SqliteMemoryRows(index.connection).put_memory_records(
            [("qa-1", "qa", "t", "qa/t/qa-1.md", "fh", "{}", b"\x00" * 8)]
        )
        cuts = [
            DocumentCut(m.id, m.hash, split_sections(index.body(m.hash))) for m in index.documents()
        ]
        SqliteChunkIndex(index.connection).replace_chunks(cuts)
    finally:
        index.close()
    return source, env


def test_every_table_of_an_index_is_one_the_copy_knows(tmp_path: Path) -> None:
    """A table added to the index without a place in `TABLES` would be lost by every copy."""
    source, _ = build_source(tmp_path)
    counts = table_counts(str(source))
    known = {table.name for table in TABLES} | {"vectors"}
    assert set(counts) <= known, set(counts) - known
    for empty in ("extraction_cache", "memory_topics", "pyqmd_namespaces"):
        assert counts[empty] == 0, empty  # the case that broke copies into SQLite
    assert counts["extraction_state"] and counts["memory_records"] and counts["pyqmd_chunks"]


def test_a_sqlite_copy_rebuilds_the_vector_prefilter(tmp_path: Path) -> None:
    """REQ-VEC-PREFILTER-003: the prefilter's bits are derived, not copied: the destination
    quantizes every copied vector, so its searches may use them at once."""
    source, _ = build_source(tmp_path)
    dest = tmp_path / "copy.sqlite"
    index = open_backend(str(source))
    try:
        copy_to(index, str(dest))
    finally:
        index.close()
    copied = SqliteIndex.open(dest)
    try:
        conn = copied.connection
        vectors = conn.scalar("SELECT COUNT(*) FROM vectors_vec")
        assert vectors and conn.scalar(f"SELECT COUNT(*) FROM {BITS_TABLE}") == vectors
        assert vector_bits.in_step(conn) == vectors
    finally:
        copied.close()


def test_copy_round_trip_in_every_direction(tmp_path: Path, pg_urls: list[str]) -> None:
    source, env = build_source(tmp_path)
    first_pg, second_pg = pg_urls
    hops = [
        (str(source), str(tmp_path / "sqlite-copy.sqlite")),  # SQLite -> SQLite
        (str(tmp_path / "sqlite-copy.sqlite"), first_pg),  # SQLite -> PostgreSQL
        (first_pg, second_pg),  # PostgreSQL -> PostgreSQL
        (second_pg, str(tmp_path / "back.sqlite")),  # PostgreSQL -> SQLite
    ]
    expected_answers = answers(env, str(source))  # a first `qmd` run settles store_config
    expected = table_counts(str(source))
    by_backend = {"sqlite": expected_answers}
    assert expected["vectors"] and expected["documents"] and expected_answers["nearest"]
    for src, dest in hops:
        done = qmd(env, "index", "copy", src, dest)
        assert done.returncode == 0, f"{src} -> {dest}: {done.stderr}"
        assert "Verified:" in done.stdout
        got = table_counts(dest)
        if dest.startswith("postgresql://"):
            # PostgreSQL has every table; those the source lacks are there, empty
            assert {name: got[name] for name in expected} == expected, (src, dest)
        else:
            assert got == expected, (src, dest)
        # ranked answers equal those of the same backend; across backends the same documents
        backend = "postgresql" if dest.startswith("postgresql://") else "sqlite"
        found = answers(env, dest)
        same_answers(by_backend.get(backend, expected_answers), found, backend in by_backend)
        by_backend.setdefault(backend, found)
    # out of PostgreSQL every table arrives, the empty ones too
    back = table_counts(str(tmp_path / "back.sqlite"))
    assert {"extraction_cache", "memory_topics", "pyqmd_session_summaries"} <= set(back)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".copying")]
    assert leftovers == []


def test_a_failed_copy_leaves_no_file_and_no_schema(tmp_path: Path) -> None:
    source, env = build_source(tmp_path)
    index = SqliteIndex.open(source)
    try:  # a table the copy cannot read, reached after most others were written
        raw = index.connection.raw
        raw.execute("DROP TABLE pyqmd_session_summaries")
        raw.execute("CREATE TABLE pyqmd_session_summaries (session_id TEXT)")
        raw.execute("INSERT INTO pyqmd_session_summaries VALUES ('s1')")
    finally:
        index.close()
    dest = tmp_path / "out" / "copy.sqlite"
    dest.parent.mkdir()
    done = qmd(env, "index", "copy", str(source), str(dest))
    assert done.returncode != 0
    assert "left as it was" in done.stderr and "internal error" not in done.stderr, done.stderr
    # no partial file, no temp; the destination's lock file stays, as every writer's does
    left = [name for name in os.listdir(dest.parent) if not name.endswith(".update.lock")]
    assert left == [], left

    url, schema = fresh_schema_url()
    try:
        done = qmd(env, "index", "copy", str(source), url)
        assert done.returncode != 0
        conninfo, _ = split_schema(url)
        with psycopg.connect(conninfo) as conn:
            row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
            assert row.fetchone() is None  # the schema this copy made is gone again
    finally:
        drop_schema(schema)


def test_a_non_empty_sqlite_destination_is_refused_and_kept(tmp_path: Path) -> None:
    source, env = build_source(tmp_path)
    dest = tmp_path / "kept.sqlite"
    assert qmd(env, "index", "copy", str(source), str(dest)).returncode == 0
    before = dest.read_bytes()
    again = qmd(env, "index", "copy", str(source), str(dest))
    assert again.returncode != 0 and "not empty" in again.stderr
    assert dest.read_bytes() == before


def test_a_copy_reads_one_snapshot_while_its_source_is_written(
    tmp_path: Path, pg_urls: list[str]
) -> None:
    """A writer adds a document while the copy runs (from its first progress tick): the copy
    holds the source as it was when it started, whole and verified, in both directions."""
    source, _ = build_source(tmp_path)
    pg_url, _ = pg_urls

    def add_document(location: str) -> None:
        rows = [
            ("content", ("hash", "doc", "created_at"), ("h-late", "late body", T0)),
            (
                "documents",
                ("collection", "path", "title", "hash", "created_at", "modified_at", "active"),
                ("docs", "late.md", "Late", "h-late", T0, T0, 1),
            ),
        ]
        postgres = location.startswith("postgresql://")
        mark = "%s" if postgres else "?"
        statements = [
            (f"INSERT INTO {t} ({', '.join(c)}) VALUES ({', '.join([mark] * len(v))})", v)
            for t, c, v in rows
        ]
        if postgres:
            conninfo, schema = split_schema(location)
            with psycopg.connect(conninfo, options=f"-c search_path={schema}") as conn:
                for statement, values in statements:
                    conn.execute(statement, values)
            return
        writer = SqliteIndex.open(location)
        try:
            for statement, values in statements:
                writer.connection.raw.execute(statement, values)
        finally:
            writer.close()

    for src, dest in ((str(source), pg_url), (pg_url, str(tmp_path / "back.sqlite"))):
        before = table_counts(src)
        written: list[bool] = []

        def progress(done: int, total: int, src: str = src, written: list[bool] = written) -> None:
            if not written:
                written.append(True)
                add_document(src)

        index = open_backend(src)
        try:
            copy_to(index, dest, progress)
        finally:
            index.close()
        assert written
        assert table_counts(dest)["documents"] == before["documents"]
        assert table_counts(src)["documents"] == before["documents"] + 1  # the writer's row
