"""BM25 full-text search over the PostgreSQL index's `documents_fts` (the LexicalIndex port).

The score is Okapi BM25 summed over the query's positive clauses: the clause's idf, and its
weighted frequency in the document (title 4, path 1.5, body 1, as FTS5's weights) saturated by
k1 and normalised by the document's length against the average. docs/decisions/0042 compares
it with `ts_rank` and `ts_rank_cd` on SciFact.

What makes it cheap (issue 26), each giving the answer ranking every matching row gives:

* **Document frequencies are kept** (`fts_lexemes`, migration 7, folded once per transaction
  since migration 9), so the idf of a word, or of a prefix that one lexeme completes, is a key
  lookup. The df of anything else (a phrase, a prefix of several lexemes) is counted; for an
  all-terms query of several clauses only once a small statement found a matching row (most
  many-word all-terms queries match nothing).
* **An all-terms query is driven by its rarest clauses.** The kept frequencies bound how many
  documents each clause matches (a prefix: the sum over the lexemes completing it); GIN reads
  only the rarest clauses' posting lists (a clause nothing holds answers at once), and the whole
  query is checked on those rows alone. GIN otherwise reads, and for a prefix unions into a
  bitmap, every clause's postings, the commonest included.
* **An any-term query is pruned (MaxScore).** A clause adds less than idf * (k1 + 1) to a row's
  score. The rows holding the rarest clauses are ranked first: the limit-th score among them is
  a floor for the final limit-th. The commonest clauses whose bounds sum below it cannot lift a
  row holding only them into the top, so only rows holding another ("essential") clause are
  read, again through GIN on those clauses alone.

`ranked_rows(..., exhaustive=True)` ranks every matching row with every frequency counted: the
reference the tests hold the pruned plans to.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from adapters.postgres.schema import TS_CONFIG
from adapters.postgres.tsquery import positive_clauses, render_tsquery

# the rows' columns: DocumentMeta's (the shared decoder's), then the body and the BM25 sum
from adapters.store_rows import META_COLUMNS, sql_limit
from domain.lexquery import LexQuery

Runner = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]

# FTS weights, in ts_rank's {D, C, B, A} order: body (D) 1, file path (C) 1.5, title (B) 4,
# FTS5's bm25(documents_fts, 1.5, 4.0, 1.0) weights scaled into ts_rank's (0, 1] range.
FTS_WEIGHTS = "{0.25, 0.375, 1.0, 1.0}"
# BM25's parameters (FTS5's values); ts_rank without normalisation of one body occurrence is
# 0.25 / 1.6449 (PostgreSQL divides by pi^2/6): the unit of term frequency.
BM25_K1 = 1.2
BM25_B = 0.75
ONE_BODY_OCCURRENCE = 0.25 / 1.64493406685
# A prefix completed by more lexemes than this gets no bound (it never drives a query).
MAX_BOUND_LEXEMES = 1000
# A clause joins the rarest in driving an all-terms query while its bound is within this
# factor of the rarest one's: reading a posting costs far less than checking a row.
DRIVER_SPREAD = 8
MAX_DRIVERS = 3
# From this many clauses an all-terms query first asks whether anything matches at all.
PROBE_CLAUSES = 2


@dataclass(frozen=True)
class ClauseStats:
    """The corpus figures and, per clause, its kept document frequency (None: must be
    counted) and a bound on the documents it matches (None: none known)."""

    documents: int
    average: float
    kept: list[int | None]
    bounds: list[int | None]
    matched: bool | None = None  # whether a row matches every clause (when probed)


def idf_of(documents: int, df: int) -> float:
    return math.log(1 + (documents - df + 0.5) / (df + 0.5))


def ranked_rows(
    run: Runner,
    query: LexQuery,
    limit: int,
    collection: str | None,
    within: frozenset[int] | None = None,
    *,
    exhaustive: bool = False,
    trace: list[str] | None = None,
) -> list[tuple[Any, ...]]:
    """The top `limit` rows (META_COLUMNS, body, BM25 sum) of `query`, best first; [] for a
    query with nothing to search or one PostgreSQL refuses. `trace` collects the tsquery each
    ranking statement read through GIN (tests show pruning happened)."""
    if limit <= 0 or not query.is_searchable:
        return []
    text = render_tsquery(query)
    clauses = positive_clauses(query)
    if text is None or not clauses:
        return []
    negated = any(clause.negated for clause in query.clauses)
    plan = _Plan(run, clauses, text, negated, sql_limit(limit), collection, within, trace)
    try:
        if exhaustive:
            return plan.exhaustive()
        if query.match_any and len(clauses) > 1:
            return plan.any_term()
        return plan.all_terms()
    except psycopg.Error:
        return []


def clause_stats(run: Runner, clauses: Sequence[str], probe: Scope | None = None) -> ClauseStats:
    """One statement: N and the average length (`fts_stats`), and each clause's kept df and
    bound. A clause parsing to one lexeme prints as 'lexeme', a prefix as 'lexeme':* (folded
    lexemes hold letters and digits only); anything else has neither.

    With `probe` (an all-terms query's text and scope), the same statement also says whether
    any row in scope matches it, reading GIN for the clauses `drivers` picks only."""
    params: list[Any] = [list(clauses)]
    statement = (
        "WITH q AS MATERIALIZED (SELECT c.i, x.q, x.q::text AS t, numnode(x.q) AS n"
        " FROM unnest(%s::text[]) WITH ORDINALITY AS c(clause, i),"
        f" LATERAL (SELECT to_tsquery('{TS_CONFIG}', c.clause) AS q) x),"
        " k AS (SELECT q.i, q.q,"
        " CASE WHEN q.n = 1 AND q.t ~ '^''[^'']+''$' THEN btrim(q.t, '''') END AS word,"
        " CASE WHEN q.n = 1 AND q.t ~ '^''[[:alnum:]]+'':[*]$'"
        " THEN substring(q.t FROM '^''([[:alnum:]]+)''') END AS prefix FROM q),"
        " s AS MATERIALIZED (SELECT k.i, k.q,"
        " CASE WHEN k.word IS NOT NULL THEN w.documents"
        " WHEN p.lexemes <= 1 THEN p.documents END AS kept,"
        " CASE WHEN k.word IS NOT NULL THEN w.documents"
        f" WHEN p.lexemes < {MAX_BOUND_LEXEMES} THEN p.documents END AS bound"
        " FROM k"
        " LEFT JOIN LATERAL (SELECT COALESCE(MAX(l.documents), 0) AS documents"
        " FROM fts_lexemes l WHERE l.lexeme = k.word) w ON k.word IS NOT NULL"
        # a range of the key (a LIKE pattern known only at run time uses no index)
        " LEFT JOIN LATERAL (SELECT COUNT(*) AS lexemes, COALESCE(SUM(s.documents), 0)"
        " AS documents FROM (SELECT l.documents FROM fts_lexemes l"
        " WHERE l.lexeme >= k.prefix AND l.lexeme < k.prefix || chr(1114111)"
        " AND starts_with(l.lexeme, k.prefix) AND l.documents > 0"
        f" LIMIT {MAX_BOUND_LEXEMES}) s) p ON k.prefix IS NOT NULL)"
    )
    tail = (
        " SELECT (SELECT documents FROM fts_stats),"
        " (SELECT total_len::float8 / GREATEST(documents, 1) FROM fts_stats),"
        " (SELECT array_agg(s.kept ORDER BY s.i) FROM s),"
        " (SELECT array_agg(s.bound ORDER BY s.i) FROM s)"
    )
    if probe is not None:
        params += [probe.text, probe.text]
        # the rule of `drivers`, in SQL: the rarest clauses by bound (a NULL bound never)
        statement += (
            ", r AS MATERIALIZED (SELECT (array_agg(s.q ORDER BY s.bound, s.i))"
            f"[1:{MAX_DRIVERS}] AS qs FROM s"
            f" WHERE s.bound <= {DRIVER_SPREAD} * (SELECT MIN(bound) FROM s)),"
            " e AS MATERIALIZED (SELECT COALESCE(r.qs[1] && COALESCE(r.qs[2], r.qs[1])"
            " && COALESCE(r.qs[3], r.qs[1]),"
            f" to_tsquery('{TS_CONFIG}', %s)) AS driver,"
            f" to_tsquery('{TS_CONFIG}', %s) AS everything FROM r),"
            # a CTE is planned for all its rows: with LIMIT 1 on the scan itself the
            # planner hopes for an early hit and reads the whole table
            " m AS MATERIALIZED (SELECT f.id FROM e, documents_fts f"
            " JOIN documents d ON d.id = f.id"
            " WHERE f.tsv @@ e.driver AND ts_match_vq(f.tsv, e.everything) AND d.active = 1"
            f"{probe.condition(params)})"
        )
        tail += ", EXISTS (SELECT 1 FROM m)"
    row = run(statement + tail, params)[0]
    return ClauseStats(
        documents=int(row[0] or 0),
        average=max(1.0, float(row[1] or 1.0)),
        kept=[None if df is None else int(df) for df in row[2]],
        bounds=[None if bound is None else int(bound) for bound in row[3]],
        matched=bool(row[4]) if probe is not None else None,
    )


@dataclass(frozen=True)
class Scope:
    """An all-terms query's text and where it is searched."""

    text: str
    collection: str | None
    within: frozenset[int] | None

    def condition(self, params: list[Any]) -> str:
        """The scope as conditions on `d` (documents); their values appended to `params`."""
        where = ""
        if self.collection:
            where += " AND d.collection = %s"
            params.append(self.collection)
        if self.within is not None:
            where += " AND d.id = ANY(%s)"
            params.append(sorted(self.within))
        return where


def drivers(bounds: Sequence[int | None]) -> list[int]:
    """The clauses GIN reads for an all-terms query: the rarest by bound (up to MAX_DRIVERS,
    within DRIVER_SPREAD of the rarest); [] when no clause has a bound."""
    known = sorted((bound, i) for i, bound in enumerate(bounds) if bound is not None)
    if not known:
        return []
    rarest = known[0][0]
    return [i for bound, i in known[:MAX_DRIVERS] if bound <= DRIVER_SPREAD * rarest]


def counted_df(run: Runner, clauses: Sequence[str]) -> list[int]:
    """Each clause's document frequency counted in one pass over the documents matching any
    of them."""
    parsed = ", ".join(f"to_tsquery('{TS_CONFIG}', %s) AS q{i}" for i in range(len(clauses)))
    counts = ", ".join(f"COUNT(*) FILTER (WHERE f.tsv @@ q.q{i})" for i in range(len(clauses)))
    anything = " | ".join(f"({clause})" for clause in clauses)
    rows = run(
        f"WITH q AS MATERIALIZED (SELECT {parsed}, to_tsquery('{TS_CONFIG}', %s) AS anything)"
        f" SELECT {counts} FROM documents_fts f, q WHERE f.tsv @@ q.anything",
        [*clauses, anything],
    )
    return [int(df or 0) for df in rows[0]]


def _frequency(clause: str, i: int) -> str:
    """The clause's weighted frequency in row `f`, in units of one body occurrence.

    ts_rank ranks a phrase or several-word clause by how near its words are, whether or not
    the row matches it: a row holding `b10 x a18` got a frequency for "b10 a18". BM25 (and
    FTS5) count a phrase only where it occurs, and MaxScore's bound rests on that (a row
    without the clause gains nothing from it), so such a clause counts only on rows it
    matches. A single word or prefix ranks 0 where absent anyway."""
    rank = f"ts_rank('{FTS_WEIGHTS}', f.tsv, q.q{i}, 0) / {ONE_BODY_OCCURRENCE}"
    if " <-> " in clause or " & " in clause:
        rank = f"CASE WHEN f.tsv @@ q.q{i} THEN {rank} ELSE 0 END"
    return f"{rank} AS t{i}"


def _either(clauses: Sequence[str], chosen: Sequence[int]) -> str:
    return " | ".join(f"({clauses[i]})" for i in chosen)


def _both(clauses: Sequence[str], chosen: Sequence[int]) -> str:
    return " & ".join(f"({clauses[i]})" for i in chosen)


class _Plan:
    def __init__(
        self,
        run: Runner,
        clauses: Sequence[str],
        text: str,
        negated: bool,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None,
        trace: list[str] | None,
    ) -> None:
        self.run = run
        self.clauses = list(clauses)
        self.text = text
        self.negated = negated
        self.limit = limit
        self.collection = collection
        self.within = within
        self.trace = trace

    # -- plans ----------------------------------------------------------------------------------

    def exhaustive(self) -> list[tuple[Any, ...]]:
        stats = clause_stats(self.run, self.clauses)
        counted = counted_df(self.run, self.clauses)
        idf = [idf_of(stats.documents, df) for df in counted]
        return self.ranked(idf, stats, self.text, None)

    def all_terms(self) -> list[tuple[Any, ...]]:
        # many clauses seldom all match: the statement reading the frequencies first says
        # whether anything does, before any is counted and the long ranking statement (10 ms
        # to plan for ten clauses) runs
        probe = len(self.clauses) >= PROBE_CLAUSES
        scope = Scope(self.text, self.collection, self.within) if probe else None
        stats = clause_stats(self.run, self.clauses, scope)
        if stats.matched is False or 0 in stats.bounds:
            return []  # (a clause no document holds: no document holds them all)
        driver, check = self.text, None
        chosen = drivers(stats.bounds)
        if chosen and len(chosen) < len(self.clauses):
            driver, check = _both(self.clauses, chosen), self.text
        return self.ranked(self.idf(stats), stats, driver, check)

    def idf(self, stats: ClauseStats) -> list[float]:
        frequencies: list[int] = [0 if df is None else df for df in stats.kept]
        unknown = [i for i, df in enumerate(stats.kept) if df is None]
        if unknown:
            counted = counted_df(self.run, [self.clauses[i] for i in unknown])
            for i, df in zip(unknown, counted, strict=True):
                frequencies[i] = df
        return [idf_of(stats.documents, df) for df in frequencies]

    def any_term(self) -> list[tuple[Any, ...]]:
        """The top rows of an any-term query, ranking only rows that can reach them (the
        module's docstring)."""
        stats = clause_stats(self.run, self.clauses)
        idf = self.idf(stats)
        # the whole query is checked on the candidates only when a negation must hold
        check = self.text if self.negated else None
        bound = [weight * (BM25_K1 + 1) for weight in idf]
        by_rarity = sorted(range(len(self.clauses)), key=lambda i: (-idf[i], i))
        first: list[int] = []
        reach = 0.0
        for i in by_rarity:  # about 20 rows per result; df from idf: (N + 1) / (e^idf - 1) - 0.5
            first.append(i)
            reach += (stats.documents + 1) / max(math.expm1(idf[i]), 1e-12) - 0.5
            if reach >= 20 * self.limit:
                break
        if len(first) == len(self.clauses):
            return self.ranked(idf, stats, self.text, None)
        rows = self.ranked(idf, stats, _either(self.clauses, first), check)
        if len(rows) < self.limit:  # no floor: rank everything
            return self.ranked(idf, stats, self.text, None)
        theta = float(rows[-1][9])
        essential = set(first)
        spare = 0.0
        for i in sorted(
            (i for i in range(len(self.clauses)) if i not in essential), key=bound.__getitem__
        ):
            # a margin for float rounding of the SQL sum: the bound must stay strictly below
            if (spare + bound[i]) * (1 + 1e-9) < theta:
                spare += bound[i]
            else:
                essential.add(i)
        if essential == set(first):
            return rows
        if len(essential) == len(self.clauses):
            return self.ranked(idf, stats, self.text, None)
        return self.ranked(idf, stats, _either(self.clauses, sorted(essential)), check)

    # -- the ranking statement ----------------------------------------------------------------

    def ranked(
        self,
        idf: Sequence[float],
        stats: ClauseStats,
        driver: str,
        check: str | None,
    ) -> list[tuple[Any, ...]]:
        """Rows GIN finds for `driver` that also match `check` (when given), ranked by BM25
        over every clause: meta columns, body, rank."""
        if self.trace is not None:
            self.trace.append(driver)
        clauses = self.clauses
        # the queries are parsed once (a MATERIALIZED CTE), not once per matching row
        parsed = ", ".join(f"to_tsquery('{TS_CONFIG}', %s) AS q{i}" for i in range(len(clauses)))
        params: list[Any] = [*clauses, driver]
        head = f"WITH q AS MATERIALIZED (SELECT {parsed}, to_tsquery('{TS_CONFIG}', %s) AS driver"
        if check is not None:
            head += f", to_tsquery('{TS_CONFIG}', %s) AS everything"
            params.append(check)
        head += ")"
        # BM25 per clause: tf = the clause's weighted frequency (ts_rank without normalisation,
        # in units of one body occurrence), saturated by k1 and normalised by the document's
        # length against the average: idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg))
        k1, b = BM25_K1, BM25_B
        terms = " + ".join(
            f"%s * (tf.t{i} * {k1 + 1} / (tf.t{i} + {k1} * (1 - {b} + {b} * f.len / %s)))"
            for i in range(len(clauses))
        )
        for weight in idf:
            params += [weight, stats.average]
        frequencies = ", ".join(_frequency(clause, i) for i, clause in enumerate(clauses))
        # ts_match_vq is @@ as a function: a condition no index takes, so GIN reads the
        # driver's postings only and the check runs on the rows they give
        checked = " AND ts_match_vq(f.tsv, q.everything)" if check is not None else ""
        # ranked and cut to `limit` before the bodies are joined: a common word matches
        # thousands of rows, and fetching each one's content before the sort cost a third of
        # a ten-word query's time at 100,000 documents
        statement = (
            f"{head}, top AS (SELECT f.id, ({terms}) AS rank FROM documents_fts f"
            " JOIN documents d ON d.id = f.id, q,"
            f" LATERAL (SELECT {frequencies}) tf"
            f" WHERE f.tsv @@ q.driver{checked} AND d.active = 1"
        )
        statement += Scope(self.text, self.collection, self.within).condition(params)
        statement += (
            " ORDER BY rank DESC, f.id LIMIT %s)"
            f" SELECT {META_COLUMNS}, content.doc, top.rank"
            " FROM top JOIN documents d ON d.id = top.id"
            " JOIN content ON content.hash = d.hash ORDER BY top.rank DESC, d.id"
        )
        params.append(int(self.limit))
        return self.run(statement, params)
