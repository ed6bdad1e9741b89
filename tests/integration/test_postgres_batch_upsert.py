"""A batch of documents on PostgreSQL (REQ-INDEX-BATCH-001): a fixed number of round trips
whatever its size, and the full-text rows and BM25's kept figures (each lexeme's document
frequency, the document count and total length) that writing its documents one by one
leaves."""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import psycopg
import pytest

from adapters.postgres.store import PostgresIndex
from domain.ports import DocumentWrite
from tests.postgres_server import drop_schema, fresh_schema_url

pytestmark = pytest.mark.postgres
T0 = "2025-01-01T00:00:00.000Z"
WORDS = [f"w{n}x" for n in range(60)] + ["running", "runs", "api", "rate-limit", "2.8.3"]


def _documents(count: int, seed: int) -> list[DocumentWrite]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        body = " ".join(rng.choice(WORDS) for _ in range(30)) + f" unique{n}"
        out.append(
            DocumentWrite(
                f"dir/n{n}.md", f"Note {n} {rng.choice(WORDS)}", f"h{seed}-{n}", body, T0, T0
            )
        )
    return out


@contextmanager
def _index() -> Iterator[PostgresIndex]:
    url, schema = fresh_schema_url()
    index = PostgresIndex.open(url, env={})
    try:
        yield index
    finally:
        index.close()
        drop_schema(schema)


def _round_trips(index: PostgresIndex, documents: list[DocumentWrite]) -> int:
    """The statements the batch sent, counted as libpq traces the protocol: every statement
    (a COPY too) ends with the server's ReadyForQuery."""
    with tempfile.TemporaryFile("w+") as trace, index.transaction(), index.connection() as conn:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            index.upsert_documents("c", documents)
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        return sum("\tReadyForQuery\t" in line for line in trace if line.startswith("B\t"))


def _changed(documents: list[DocumentWrite]) -> list[DocumentWrite]:
    """The documents again: a new title, a new body, unchanged ones, in turn."""
    return [
        DocumentWrite(
            d.path,
            d.title + ("!" if n % 3 == 0 else ""),
            d.content_hash + ("x" if n % 3 == 1 else ""),
            d.body,
            T0,
            T0,
        )
        for n, d in enumerate(documents)
    ]


def test_a_batch_costs_the_same_round_trips_whatever_its_size() -> None:
    """A small batch is one round of statements; a large one a fixed number of rounds
    (adapters/postgres/batch.py: the next round is put together while the server writes)."""
    with _index() as small, _index() as large, _index() as larger:
        tiny = _round_trips(small, _documents(6, 2))
        trips = _round_trips(large, _documents(200, 2)), _round_trips(larger, _documents(800, 2))
        # and again, over rows already indexed: a new title, a new body, unchanged ones
        tiny_again = _round_trips(small, _changed(_documents(6, 2)))
        again = (
            _round_trips(large, _changed(_documents(200, 2))),
            _round_trips(larger, _changed(_documents(800, 2))),
        )
    assert tiny <= 12 and tiny_again <= 12, (tiny, tiny_again)
    assert trips[0] == trips[1] <= 30, trips
    assert again[0] == again[1] <= 30, again


def _figures(index: PostgresIndex) -> tuple[object, ...]:
    with index.connection() as conn:
        lexemes = conn.execute(
            "SELECT lexeme, documents FROM fts_lexemes WHERE documents <> 0 ORDER BY lexeme"
        ).fetchall()
        stats = conn.execute("SELECT documents, total_len FROM fts_stats").fetchall()
        rows = conn.execute(
            "SELECT d.path, f.tsv::text, f.len FROM documents_fts f"
            " JOIN documents d ON d.id = f.id ORDER BY d.path"
        ).fetchall()
    return lexemes, stats, rows


def test_a_batch_keeps_the_figures_writing_one_by_one_keeps() -> None:
    # batches of several rounds (adapters/postgres/batch.py), a path's rows in different ones
    first = _documents(360, 3)
    second = [
        DocumentWrite(
            d.path,
            d.title + " again",
            d.content_hash + ("y" if n % 2 else ""),
            d.body + (" added words" if n % 2 else ""),
            T0,
            T0,
        )
        for n, d in enumerate(_documents(360, 3)[::3])
    ] + _documents(420, 4)[360:]
    with _index() as rows, _index() as batch:
        for part in (first, second):
            with rows.transaction():
                for d in part:
                    rows.upsert_document(
                        "c", d.path, d.title, d.content_hash, d.body, d.created_at, d.modified_at
                    )
            with batch.transaction():
                batch.upsert_documents("c", part)
        by_rows, by_batch = _figures(rows), _figures(batch)
        # and the kept frequencies are the counted ones
        with batch.connection() as conn:
            counted = conn.execute(
                "SELECT lexeme, COUNT(*) FROM documents_fts, unnest(tsvector_to_array(tsv))"
                " AS lexeme GROUP BY lexeme ORDER BY lexeme"
            ).fetchall()
    assert by_batch == by_rows
    assert [tuple(r) for r in by_batch[0]] == [tuple(r) for r in counted]
    assert by_batch[1] == [(420, sum(r[2] for r in by_batch[2]))]  # type: ignore[index]


def test_a_role_without_temporary_tables_writes_its_batches_row_by_row() -> None:
    """The batch's temporary table needs TEMP on the database; a role without it (as the
    privilege check answers) gets the same rows and figures, written one by one."""
    with _index() as staged, _index() as plain:
        plain._temp_allowed = False  # what `has_database_privilege(..., 'TEMP')` answers then
        outcomes = [
            [o.kind for o in index.upsert_documents("c", _documents(40, 5))]
            for index in (staged, plain)
        ]
        assert outcomes[0] == outcomes[1] == ["indexed"] * 40
        assert _figures(staged) == _figures(plain)


def test_a_batch_commits_without_waiting_for_the_disk_and_only_its_own_transaction() -> None:
    """SQLite's WAL with `synchronous = NORMAL`: an indexing run's commits do not wait for
    the WAL flush (a crash may lose the last ones whole); the setting ends with the batch's
    transaction, other work keeps the server's."""
    with _index() as index:
        with index.transaction(), index.connection() as conn:
            before = conn.execute("SHOW synchronous_commit").fetchone()
            index.upsert_documents("c", _documents(3, 6))
            during = conn.execute("SHOW synchronous_commit").fetchone()
        with index.connection() as conn:
            after = conn.execute("SHOW synchronous_commit").fetchone()
    assert (before, during, after) == (("on",), ("off",), ("on",))


def test_a_run_that_doubles_the_index_refreshes_the_planners_statistics_on_the_way() -> None:
    """A run filling an empty index analyses the tables its batches join against once it has
    doubled them, before its end's tidy: planned from the empty tables' figures, each batch
    cost more than the one before (issue 36)."""
    with _index() as index:
        for n in range(3):
            batch = [replace(d, path=f"run{n}/{d.path}") for d in _documents(1000, seed=n)]
            index.upsert_documents("c", batch)
        with index.connection() as conn:
            analysed = dict(
                conn.execute(
                    "SELECT relname, reltuples FROM pg_class WHERE relname = ANY(%s) "
                    "AND relnamespace = current_schema()::regnamespace",
                    (["documents", "content", "documents_fts", "fts_lexemes"],),
                ).fetchall()
            )
    assert set(analysed) == {"documents", "content", "documents_fts", "fts_lexemes"}
    assert analysed["documents"] >= 2000, analysed
    assert analysed["documents_fts"] >= 2000, analysed


def test_an_update_that_writes_nothing_analyses_nothing() -> None:
    """Only documents written count toward the statistics refresh: the same 3,000 documents
    handed over again (a no-op `qmd update`) send no ANALYZE."""
    with _index() as index:
        batches = [
            [replace(d, path=f"run{n}/{d.path}") for d in _documents(1000, seed=n)]
            for n in range(3)
        ]
        for batch in batches:
            index.upsert_documents("c", batch)
        with (
            tempfile.TemporaryFile("w+") as trace,
            index.transaction(),
            index.connection() as conn,
        ):
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            try:
                for batch in batches:
                    outcomes = index.upsert_documents("c", batch)
                    assert {o.kind for o in outcomes} == {"unchanged"}
            finally:
                conn.pgconn.untrace()
            trace.seek(0)
            sent = [line for line in trace if line.startswith("F\t")]
    assert sent, "the trace saw the statements"
    assert not [line for line in sent if "ANALYZE" in line], sent
