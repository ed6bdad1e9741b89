"""Full-text search on PostgreSQL (the LexicalIndex port): Okapi BM25 over the tsvector rows
(docs/decisions/0042), computed and pruned by adapters/postgres/bm25.py."""

from __future__ import annotations

from typing import Any

from adapters.postgres.bm25 import filled_rows, ranked_rows
from adapters.postgres.connection import PgConnections
from adapters.storage.sql_rows import meta_from_row as _meta
from adapters.storage.sql_rows import metadata_from_text
from domain.lexfill import FilledHits
from domain.lexquery import LexQuery
from domain.model import Document, LexHit

# The BM25 sum is reported as is (negated, as FTS5's bm25): it spreads over the same range.
RANK_SCALE = 1.0


class PgLexical(PgConnections):
    """LexicalIndex over the pool."""

    def search_lex(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[LexHit]:
        """Full-text search ranked by BM25 (adapters/postgres/bm25.py); never raises on user
        input. `within`: only these document ids (a metadata filter), applied before the limit."""
        return [hit_from_row(r) for r in ranked_rows(self._query, query, limit, collection, within)]

    def search_lex_filled(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> FilledHits:
        """The any-term fill with the corpus figures read once for both rules."""
        every, fill = filled_rows(self._query, query, limit, collection, within)
        return [hit_from_row(r) for r in every], [hit_from_row(r) for r in fill]


def hit_from_row(row: tuple[Any, ...]) -> LexHit:
    """A ranked row (adapters/postgres/bm25.py) as a hit, its metadata read with it."""
    return LexHit(
        document=Document(meta=_meta(row), body=str(row[8])),
        bm25=-float(row[9]) * RANK_SCALE,
        metadata={} if row[11] is None else metadata_from_text(row[11]),
    )
