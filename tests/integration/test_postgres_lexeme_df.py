"""BM25's document frequencies on PostgreSQL come from `fts_lexemes` (migration 7), kept by
triggers on `documents_fts`: the table starts from the rows an index at version 6 already has,
follows every kind of write, and gives exactly the frequencies (hence the ranking) that
counting the matching rows at query time gave."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from psycopg import sql

from adapters.postgres.schema import MIGRATIONS, SCHEMA_VERSION, current_version, migrate
from adapters.postgres.store import PostgresIndex, fts_params, fts_row_sql
from adapters.postgres.tsquery import positive_clauses, render_tsquery
from adapters.postgres.url import split_schema
from domain.lexquery import parse_lex_query
from tests.postgres_server import drop_schema, fresh_schema_url

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
    url, schema = fresh_schema_url()
    conninfo, _ = split_schema(url)
    rng = random.Random(7)
    try:
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        # an index written before the counts were kept (version 6), with rows
        with psycopg.connect(conninfo, options=f"-c search_path={schema},public") as conn:
            conn.autocommit = True
            assert migrate(conn, MIGRATIONS[:6]) == 6
            for n in range(20):
                body = _body(rng)
                conn.execute(
                    "INSERT INTO content (hash, doc, created_at) VALUES (%s, %s, %s)",
                    (f"h{n}", body, T0),
                )
                row = conn.execute(
                    "INSERT INTO documents (collection, path, title, hash, created_at,"
                    " modified_at) VALUES ('c', %s, %s, %s, %s, %s) RETURNING id",
                    (f"n{n}.md", f"Note {n}", f"h{n}", T0, T0),
                ).fetchone()
                assert row is not None
                conn.execute(fts_row_sql(), fts_params(int(row[0]), "c", f"n{n}.md", "", body))
        index = PostgresIndex.open(url, env={})
        try:
            with index.connection() as conn:
                assert current_version(conn) == SCHEMA_VERSION == 8
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


class CountingIndex(PostgresIndex):
    """The index as it ranked before migration 7: every clause's frequency counted over the
    rows matching it, at query time."""

    def _idf(self, clauses: Sequence[str]) -> tuple[list[float], float]:
        total = int(self._scalar("SELECT documents FROM fts_stats"))
        average = float(self._scalar("SELECT total_len::float8 / documents FROM fts_stats"))
        counted = self._counted_df(clauses)
        return [math.log(1 + (total - df + 0.5) / (df + 0.5)) for df in counted], max(1.0, average)


def _ranked(index: PostgresIndex, text: str) -> list[tuple[str, float]]:
    return [
        (h.document.meta.path, h.bm25) for h in index.search_lex(parse_lex_query(text), 10, None)
    ]


def test_kept_frequencies_rank_exactly_as_counted_ones() -> None:
    url, schema = fresh_schema_url()
    rng = random.Random(11)
    index = PostgresIndex.open(url, env={})
    before = CountingIndex.open(url, env={})
    try:
        with index.transaction():
            for n in range(300):
                index.upsert_document("c", f"d{n}.md", f"T {n}", f"h{n}", _body(rng), T0, T0)
        index.deactivate_documents("c", [f"d{n}.md" for n in range(0, 300, 7)])
        found = 0
        for text in QUERIES:
            clauses = positive_clauses(parse_lex_query(text))
            kept_idf, average = index._idf(clauses)
            assert (kept_idf, average) == before._idf(clauses), text
            assert _ranked(index, text) == _ranked(before, text), text
            found += len(_ranked(index, text))
        assert found > 20  # the queries do match: the comparison is not between empty lists
    finally:
        before.close()
        index.close()
        drop_schema(schema)


class FullRankingIndex(CountingIndex):
    """The ranking before pruning: every row matching any clause is ranked."""

    def _ranked_any(
        self,
        clauses: Sequence[str],
        idf: Sequence[float],
        average: float,
        text: str,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None,
    ) -> list[tuple[Any, ...]]:
        return self._ranked(clauses, idf, average, text, limit, collection, within)


class WatchedIndex(PostgresIndex):
    """Keeps the conditions it ranked rows under, to show that pruning took place."""

    conditions: list[str]

    def _ranked(
        self,
        clauses: Sequence[str],
        idf: Sequence[float],
        average: float,
        text: str,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None,
    ) -> list[tuple[Any, ...]]:
        self.conditions.append(text)
        return super()._ranked(clauses, idf, average, text, limit, collection, within)


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
    index = WatchedIndex(url, env={})
    index.conditions = []
    before = FullRankingIndex.open(url, env={})
    try:
        with index.transaction():
            for n in range(600):
                title = " ".join(rng.choice(WORDS) for _ in range(2))
                index.upsert_document("c", f"d{n}.md", title, f"h{n}", _body(rng), T0, T0)
        pruned = 0
        for text in ANY_QUERIES:
            query = replace(parse_lex_query(text), match_any=True)
            for collection in (None, "c"):
                index.conditions.clear()
                got = index.search_lex(query, limit, collection)
                want = before.search_lex(query, limit, collection)
                assert [(h.document.meta.path, h.bm25) for h in got] == [
                    (h.document.meta.path, h.bm25) for h in want
                ], text
                assert got  # every query matches: the lists compared are not empty
                pruned += index.conditions[-1] != render_tsquery(query)
        assert pruned > 0  # the candidates were restricted at least once
    finally:
        before.close()
        index.close()
        drop_schema(schema)
