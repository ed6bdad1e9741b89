"""BM25's document frequencies on PostgreSQL come from `fts_lexemes` (migration 7), kept by
triggers on `documents_fts`: the table starts from the rows an index at version 6 already has,
follows every kind of write, and gives exactly the frequencies (hence the ranking) that
counting the matching rows at query time gave."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from adapters.postgres import bm25
from adapters.postgres.schema import SCHEMA_VERSION, current_version
from adapters.postgres.store import PostgresIndex
from adapters.postgres.tsquery import positive_clauses, render_tsquery
from domain.lexquery import parse_lex_query
from tests.postgres_server import drop_schema, fresh_schema_url, older_index, write_old_document

pytestmark = pytest.mark.postgres
T0 = "2025-01-01T00:00:00.000Z"
WORDS = [f"w{n}x" for n in range(70)] + ["running", "runs", "ran", "api", "rate", "limit"]


def _body(rng: random.Random) -> str:
    # ten common words and many rare ones
    return " ".join(rng.choice(WORDS[:10] if rng.random() < 0.7 else WORDS) for _ in range(40))


def _kept_and_counted(index: PostgresIndex) -> tuple[dict[str, int], dict[str, int]]:
    with index.connection() as conn:
        kept = {
            str(lexeme): int(n)
            for lexeme, n in conn.execute("SELECT lexeme, documents FROM fts_lexemes")
            if int(n) != 0
        }
        counted = {
            str(lexeme): int(n)
            for lexeme, n in conn.execute(
                "SELECT lexeme, COUNT(*) FROM documents_fts,"
                " unnest(tsvector_to_array(tsv)) AS lexeme GROUP BY lexeme"
            )
        }
    return kept, counted


def test_a_version_6_index_gets_lexeme_counts_that_follow_every_write() -> None:
    rng = random.Random(7)
    # an index written before the counts were kept (version 6), with rows
    with older_index(6) as (url, schema, conn):
        for n in range(20):
            write_old_document(conn, n, _body(rng))
    try:
        index = PostgresIndex.open(url, env={})
        try:
            with index.connection() as conn:
                assert current_version(conn) == SCHEMA_VERSION == 15
            kept, counted = _kept_and_counted(index)
            assert kept == counted and len(counted) > 5
            with index.transaction():  # an UPDATE (changed body) and INSERTs
                index.upsert_document("c", "n0.md", "Note 0", "h90", "brand new words", T0, T0)
                for n in range(3):
                    index.upsert_document("d", f"x{n}.md", "X", f"hx{n}", _body(rng), T0, T0)
            kept, counted = _kept_and_counted(index)
            assert kept == counted and counted["brand"] == 1
            index.deactivate_documents("c", ["n1.md", "n2.md"])  # DELETE
            assert _kept_and_counted(index)[0] == _kept_and_counted(index)[1]
            index.delete_collection("d")  # the foreign key's cascade
            kept, counted = _kept_and_counted(index)
            assert kept == counted
        finally:
            index.close()
    finally:
        drop_schema(schema)


QUERIES = (
    "running api",
    "w0x w1x w2x w3x w4x w5x w6x w7x w8x w9x",
    "rate limit w3x -w0x",
    '"rate limit" w1x',
    "run* w2x",
    "w59x w58x w57x absentword",
    "notes/api.md w4x",
    '"w5x" w6x',
    "w6 w69x",
)


def _ranked(index: PostgresIndex, text: str, exhaustive: bool = False) -> list[tuple[str, float]]:
    rows = bm25.ranked_rows(index._query, parse_lex_query(text), 10, None, exhaustive=exhaustive)
    return [(str(r[2]), float(r[9])) for r in rows]


def test_kept_frequencies_rank_exactly_as_counted_ones() -> None:
    url, schema = fresh_schema_url()
    rng = random.Random(11)
    index = PostgresIndex.open(url, env={})
    try:
        with index.transaction():
            for n in range(300):
                index.upsert_document("c", f"d{n}.md", f"T {n}", f"h{n}", _body(rng), T0, T0)
        index.deactivate_documents("c", [f"d{n}.md" for n in range(0, 300, 7)])
        found = 0
        for text in QUERIES:
            clauses = positive_clauses(parse_lex_query(text))
            stats = bm25.clause_stats(index._query, clauses)
            counted = bm25.counted_df(index._query, clauses)
            assert [df for df in stats.kept if df is not None] == [
                df for df, kept in zip(counted, stats.kept, strict=True) if kept is not None
            ], text
            assert all(
                bound is None or bound >= df
                for bound, df in zip(stats.bounds, counted, strict=True)
            ), text
            assert _ranked(index, text) == _ranked(index, text, exhaustive=True), text
            found += len(_ranked(index, text))
        assert found > 20  # the queries do match: the comparison is not between empty lists
    finally:
        index.close()
        drop_schema(schema)


ANY_QUERIES = (
    "w0x w1x w2x w3x w4x w5x w6x w7x w8x w9x",
    "w0x w1x w2x w3x w4x w5x w6x w7x w8x w50x",
    "w60x w61x w0x w1x w2x w3x w4x w5x w6x w7x",
    "w10x w11x w12x w13x w14x w15x w16x w17x w18x w19x",
    "w0x w30x w31x -w1x",
    '"w0x w1x" w40x w2x w3x',
    "w2* w41x w0x",
    "absentword w0x w1x w45x",
)


@pytest.mark.parametrize("limit", [1, 5, 10, 40])
def test_pruned_any_term_ranking_equals_ranking_every_row(limit: int) -> None:
    url, schema = fresh_schema_url()
    rng = random.Random(limit)
    index = PostgresIndex.open(url, env={})
    try:
        with index.transaction():
            for n in range(600):
                title = " ".join(rng.choice(WORDS) for _ in range(2))
                index.upsert_document("c", f"d{n}.md", title, f"h{n}", _body(rng), T0, T0)
        pruned = 0
        for text in ANY_QUERIES:
            query = replace(parse_lex_query(text), match_any=True)
            for collection in (None, "c"):
                trace: list[str] = []
                got = bm25.ranked_rows(index._query, query, limit, collection, trace=trace)
                want = bm25.ranked_rows(index._query, query, limit, collection, exhaustive=True)
                assert [(r[2], r[9]) for r in got] == [(r[2], r[9]) for r in want], text
                assert got  # every query matches: the lists compared are not empty
                pruned += trace[-1] != render_tsquery(query)
        assert pruned > 0  # the candidates were restricted at least once
    finally:
        index.close()
        drop_schema(schema)


def test_frequencies_are_folded_at_commit_and_rolled_back_with_their_writes() -> None:
    """Migration 9 queues each write's lexemes and folds them once, when the transaction
    commits: the queue is empty after every commit, a rolled-back write leaves no count, and
    a reader never sees a count of rows it cannot see."""
    url, schema = fresh_schema_url()
    rng = random.Random(5)
    index = PostgresIndex.open(url, env={})
    reader = PostgresIndex.open(url, env={})
    try:
        with index.transaction():
            for n in range(30):
                index.upsert_document("c", f"d{n}.md", "T", f"h{n}", _body(rng), T0, T0)
            index.upsert_document("c", "new.md", "T", "hn", "uncommittedword", T0, T0)
            with index.connection() as conn:  # before the commit: queued, not yet folded
                assert conn.execute("SELECT COUNT(*) FROM fts_lexeme_changes").fetchone() == (31,)
            assert (
                reader._scalar("SELECT COUNT(*) FROM fts_lexemes WHERE lexeme = 'uncommittedword'")
                == 0
            )
        kept, counted = _kept_and_counted(index)
        assert kept == counted and counted["uncommittedword"] == 1
        for table in ("fts_lexeme_changes", "fts_lexeme_pending"):
            assert index._scalar(f"SELECT COUNT(*) FROM {table}") == 0
        with index.connection() as conn:  # a write rolled back to a savepoint
            with conn.transaction(force_rollback=True):
                conn.execute("DELETE FROM documents_fts")
            conn.execute("DELETE FROM documents_fts WHERE id IN (SELECT MIN(id) FROM documents)")
        kept, counted = _kept_and_counted(index)
        assert kept == counted and len(counted) > 5
    finally:
        reader.close()
        index.close()
        drop_schema(schema)
