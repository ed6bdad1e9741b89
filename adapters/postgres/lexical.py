"""Full-text search on PostgreSQL (the LexicalIndex port): Okapi BM25 over the tsvector rows
(docs/decisions/0042), any-term queries pruned by MaxScore."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import psycopg

from adapters.postgres.connection import PgConnections
from adapters.postgres.schema import TS_CONFIG
from adapters.postgres.tsquery import positive_clauses, render_tsquery
from adapters.store_rows import META_COLUMNS as _META_COLUMNS
from adapters.store_rows import meta_from_row as _meta
from domain.lexquery import LexQuery
from domain.model import Document, LexHit

# FTS weights, in ts_rank's {D, C, B, A} order: body (D) 1, file path (C) 1.5, title (B) 4,
# FTS5's bm25(documents_fts, 1.5, 4.0, 1.0) weights scaled into ts_rank's (0, 1] range.
FTS_WEIGHTS = "{0.25, 0.375, 1.0, 1.0}"

# The BM25 sum is reported as is (negated, as FTS5's bm25): it spreads over the same range.
RANK_SCALE = 1.0

# BM25's parameters (FTS5's values); ts_rank without normalisation of one body occurrence is
# 0.25 / 1.6449 (PostgreSQL divides by pi^2/6): the unit of term frequency.
BM25_K1 = 1.2
BM25_B = 0.75
ONE_BODY_OCCURRENCE = 0.25 / 1.64493406685


class PgLexical(PgConnections):
    """LexicalIndex over the pool."""

    def search_lex(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[LexHit]:
        """Full-text search ranked by BM25; never raises on user input. `within`: only these
        document ids (a metadata filter), applied before the limit.

        The score is Okapi BM25 summed over the query's positive clauses: the clause's idf, and
        its weighted frequency in the document (title 4, path 1.5, body 1, as FTS5's weights)
        saturated by k1 and normalised by the document's length against the average.
        docs/decisions/0042 compares it with `ts_rank` and `ts_rank_cd` on SciFact.

        An any-term query is pruned (MaxScore): the rows holding its rarest clauses are ranked
        first, and a clause whose bound cannot lift a row past the limit-th score found is
        left out of the candidates (`_essential`); the answer is the one ranking every row
        gives."""
        if limit <= 0 or not query.is_searchable:
            return []
        text = render_tsquery(query)
        clauses = positive_clauses(query)
        if text is None or not clauses:
            return []
        try:
            idf, average = self._idf(clauses)
        except psycopg.Error:
            return []
        try:
            if not query.match_any or len(clauses) == 1:
                rows = self._ranked(clauses, idf, average, text, limit, collection, within)
            else:
                rows = self._ranked_any(clauses, idf, average, text, limit, collection, within)
        except psycopg.Error:
            return []
        return [
            LexHit(
                document=Document(meta=_meta(r), body=str(r[8])),
                bm25=-float(r[9]) * RANK_SCALE,
            )
            for r in rows
        ]

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
        """The top `limit` rows of an any-term query, ranking only rows that can reach them.

        A clause adds less than idf * (k1 + 1) to a row's score (tf / (tf + k1 * norm) < 1).
        The rows holding the rarest clauses (about 20 rows per result) are ranked first: the
        limit-th score among them, theta, is a floor for the final limit-th. The commonest
        clauses whose bounds sum below theta are then non-essential: a row holding only those
        scores below theta, so only rows holding an essential clause need ranking."""
        bound = [weight * (BM25_K1 + 1) for weight in idf]
        by_rarity = sorted(range(len(clauses)), key=lambda i: -idf[i])
        first: list[int] = []
        # idf falls as df grows: df = (N + 1) / (exp(idf) - 1) - 0.5, enough to size the set
        total = self._fts_documents()
        reach = 0.0
        for i in by_rarity:
            first.append(i)
            reach += (total + 1) / max(math.expm1(idf[i]), 1e-12) - 0.5
            if reach >= 20 * limit:
                break
        if len(first) == len(clauses):
            return self._ranked(clauses, idf, average, text, limit, collection, within)
        rows = self._ranked(
            clauses, idf, average, self._restricted(clauses, first, text), limit, collection, within
        )
        if len(rows) < limit:  # no floor: rank everything
            return self._ranked(clauses, idf, average, text, limit, collection, within)
        theta = float(rows[-1][9])
        essential = set(first)
        spare = 0.0
        for i in sorted(
            (i for i in range(len(clauses)) if i not in essential), key=bound.__getitem__
        ):
            # a margin for float rounding of the SQL sum: the bound must stay strictly below
            if (spare + bound[i]) * (1 + 1e-9) < theta:
                spare += bound[i]
            else:
                essential.add(i)
        if essential == set(first):
            return rows
        if len(essential) == len(clauses):
            return self._ranked(clauses, idf, average, text, limit, collection, within)
        restricted = self._restricted(clauses, sorted(essential), text)
        return self._ranked(clauses, idf, average, restricted, limit, collection, within)

    @staticmethod
    def _restricted(clauses: Sequence[str], chosen: Sequence[int], text: str) -> str:
        """The query's own condition, further requiring one of the chosen clauses."""
        anyone = " | ".join(f"({clauses[i]})" for i in chosen)
        return f"({anyone}) & ({text})"

    def _fts_documents(self) -> int:
        return int(self._scalar("SELECT documents FROM fts_stats") or 0)

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
        """Rows matching `text`, ranked by BM25 over `clauses`: meta columns, body, rank."""
        # the queries are parsed once (a MATERIALIZED CTE), not once per matching row
        parsed = ", ".join(f"to_tsquery('{TS_CONFIG}', %s) AS q{i}" for i in range(len(clauses)))
        # BM25 per clause: tf = the clause's weighted frequency (ts_rank without normalisation,
        # in units of one body occurrence), saturated by k1 and normalised by the document's
        # length against the average: idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg))
        k1, b = BM25_K1, BM25_B
        terms = " + ".join(
            f"%s * (tf.t{i} * {k1 + 1} / (tf.t{i} + {k1} * (1 - {b} + {b} * f.len / %s)))"
            for i in range(len(clauses))
        )
        frequencies = ", ".join(
            f"ts_rank('{FTS_WEIGHTS}', f.tsv, q.q{i}, 0) / {ONE_BODY_OCCURRENCE} AS t{i}"
            for i in range(len(clauses))
        )
        params: list[Any] = [*clauses, text]
        for weight in idf:
            params += [weight, average]
        # ranked and cut to `limit` before the bodies are joined: a common word matches
        # thousands of rows, and fetching each one's content before the sort cost a third of
        # a ten-word query's time at 100,000 documents
        statement = (
            f"WITH q AS MATERIALIZED (SELECT {parsed},"
            f" to_tsquery('{TS_CONFIG}', %s) AS everything),"
            f" top AS (SELECT f.id, ({terms}) AS rank FROM documents_fts f"
            " JOIN documents d ON d.id = f.id, q,"
            f" LATERAL (SELECT {frequencies}) tf"
            " WHERE f.tsv @@ q.everything AND d.active = 1"
        )
        if collection:
            statement += " AND d.collection = %s"
            params.append(collection)
        if within is not None:
            statement += " AND d.id = ANY(%s)"
            params.append(sorted(within))
        statement += (
            " ORDER BY rank DESC, f.id LIMIT %s)"
            f" SELECT {_META_COLUMNS}, content.doc, top.rank"
            " FROM top JOIN documents d ON d.id = top.id"
            " JOIN content ON content.hash = d.hash ORDER BY top.rank DESC, d.id"
        )
        params.append(int(limit))
        return self._query(statement, params)

    def _idf(self, clauses: Sequence[str]) -> tuple[list[float], float]:
        """BM25's idf, ln(1 + (N - df + 0.5) / (df + 0.5)), of each clause, and the average
        document length. N and the lengths come from `fts_stats` (migration 6); the df of a
        one-word clause, or of a prefix that one lexeme of the index completes, from
        `fts_lexemes` (migration 7), both kept current by triggers. Only phrases, several-word
        clauses and prefixes of several lexemes are counted over their matching rows."""
        rows = self._query(
            "WITH q AS MATERIALIZED (SELECT c.i, to_tsquery("
            f"'{TS_CONFIG}', c.clause) AS q"
            " FROM unnest(%s::text[]) WITH ORDINALITY AS c(clause, i))"
            " SELECT (SELECT documents FROM fts_stats),"
            " (SELECT total_len::float8 / GREATEST(documents, 1) FROM fts_stats),"
            # one lexeme without weights prints as 'lexeme', a prefix as 'lexeme':*; a prefix
            # is known when at most one lexeme in the index completes it (else NULL: counted)
            " array_agg(CASE WHEN numnode(q.q) <> 1 THEN NULL"
            " WHEN q.q::text ~ '^''[^'']+''$' THEN"
            " COALESCE((SELECT l.documents FROM fts_lexemes l"
            " WHERE l.lexeme = btrim(q.q::text, '''')), 0)"
            # folded lexemes hold letters and digits only
            " WHEN q.q::text ~ '^''[[:alnum:]]+'':[*]$' THEN"
            " (SELECT CASE WHEN COUNT(*) <= 1 THEN COALESCE(MAX(s.documents), 0) END"
            " FROM (SELECT l.documents FROM fts_lexemes l"
            # a range of the key (a LIKE pattern known only at run time uses no index)
            " WHERE l.lexeme >= substring(q.q::text FROM '^''([[:alnum:]]+)''')"
            " AND l.lexeme < substring(q.q::text FROM '^''([[:alnum:]]+)''') || chr(1114111)"
            " AND starts_with(l.lexeme, substring(q.q::text FROM '^''([[:alnum:]]+)'''))"
            " AND l.documents > 0 LIMIT 2) s)"
            " END ORDER BY q.i)"
            " FROM q",
            [list(clauses)],
        )
        total = int(rows[0][0] or 0)
        average = max(1.0, float(rows[0][1] or 1.0))
        kept: list[int | None] = [None if df is None else int(df) for df in rows[0][2]]
        unknown = [i for i, df in enumerate(kept) if df is None]
        if unknown:
            counted = self._counted_df([clauses[i] for i in unknown])
            for i, df in zip(unknown, counted, strict=True):
                kept[i] = df
        idf = [math.log(1 + (total - int(df or 0) + 0.5) / (int(df or 0) + 0.5)) for df in kept]
        return idf, average

    def _counted_df(self, clauses: Sequence[str]) -> list[int]:
        """Each clause's document frequency counted in one pass over the documents matching
        any of them (what every search did before migration 7)."""
        parsed = ", ".join(f"to_tsquery('{TS_CONFIG}', %s) AS q{i}" for i in range(len(clauses)))
        counts = ", ".join(f"COUNT(*) FILTER (WHERE f.tsv @@ q.q{i})" for i in range(len(clauses)))
        anything = " | ".join(f"({clause})" for clause in clauses)
        rows = self._query(
            f"WITH q AS MATERIALIZED (SELECT {parsed}, to_tsquery('{TS_CONFIG}', %s) AS anything)"
            f" SELECT {counts} FROM documents_fts f, q WHERE f.tsv @@ q.anything",
            [*clauses, anything],
        )
        return [int(df or 0) for df in rows[0]]
