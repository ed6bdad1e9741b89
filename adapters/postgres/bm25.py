"""BM25 full-text search over the PostgreSQL index's `documents_fts` (the LexicalIndex port).

The score is FTS5's bm25 summed over the query's positive clauses: the clause's idf (FTS5's
formula), and its weighted hit count in the document (title 4, path 1.5, body 1, as FTS5's
weights) saturated by k1 and normalised by the document's token count against the average
(issue 36 made each of these FTS5's; docs/postgres.md says what still differs).
docs/decisions/0042 compares it with `ts_rank` and `ts_rank_cd` on SciFact.

What makes it cheap (issue 26), each giving the answer ranking every matching row gives:

* **Document frequencies are kept** (`fts_lexemes`, migration 7, folded once per transaction
  since migration 9), so the idf of a word, or of a prefix that one lexeme completes, is a key
  lookup. The df of anything else (a phrase, a prefix of several lexemes) is counted; for an
  all-terms query of four clauses or more, or with a df to count, only once a small statement
  found a matching row (most many-word all-terms queries match nothing).
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

* **The any-term fill is one search** (`filled_rows`, docs/decisions/0052): the figures are
  read once for both rules, and where neither needs a step of its own one statement ranks the
  every-term rows and, only when they fall short, the any-term rows that fill the limit.
* **The planner sees what it plans for.** Each statement reads GIN with its tsquery written in
  its condition: taken from a CTE, the tsquery was unknown to the planner, which then scanned
  every row at 5,000 documents. Each tsvector is kept in its row (migration 10), not fetched
  from TOAST by every `ts_rank`, and an indexing run folds GIN's pending list and refreshes the
  statistics (REQ-INDEX-FTS-TIDY-002).

`ranked_rows(..., exhaustive=True)` ranks every matching row with every frequency counted: the
reference the tests hold the pruned plans to.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import psycopg

from adapters.postgres.tsquery import (
    has_grouped_clause,
    positive_clauses,
    render_tsquery,
    tsquery_sql,
)

# the rows' columns: DocumentMeta's (the shared decoder's), then the body and the BM25 sum
from adapters.storage.sql_rows import META_COLUMNS, sql_limit
from domain.lexquery import LexQuery

Runner = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]

# FTS weights, in ts_rank_cd's {D, C, B, A} order: body (D) 1, file path (C) 1.5, title (B) 4,
# FTS5's bm25(documents_fts, 1.5, 4.0, 1.0) weights scaled into PostgreSQL's (0, 1] range.
FTS_WEIGHTS = "{0.25, 0.375, 1.0, 1.0}"
# BM25's parameters (FTS5's values). ts_rank_cd without normalisation sums, over a clause's
# occurrences, the weight of the column each is in (a one-word cover is worth its weight): in
# units of one body occurrence, FTS5's weighted hit count.
BM25_K1 = 1.2
BM25_B = 0.75
ONE_BODY_OCCURRENCE = 0.25
# A prefix completed by more lexemes than this gets no bound (it never drives a query).
MAX_BOUND_LEXEMES = 1000
# A clause joins the rarest in driving an all-terms query while its bound is within this
# factor of the rarest one's: reading a posting costs far less than checking a row.
DRIVER_SPREAD = 8
MAX_DRIVERS = 3
# From this many clauses an all-terms query asks whether anything matches at all in the
# statement that reads its figures (a shorter one with a df to count asks apart).
PROBE_CLAUSES = MAX_DRIVERS + 1


@dataclass(frozen=True)
class ClauseStats:
    """The corpus figures and, per clause, its kept document frequency (None: must be
    counted) and a bound on the documents it matches (None: none known)."""

    documents: int
    average: float
    kept: list[int | None]
    bounds: list[int | None]
    matched: bool | None = None  # whether a row matches every clause (when probed)


# FTS5's floor for the idf of a clause in half the documents or more (its bm25 never lets a
# matching clause count for nothing, nor against a row)
MIN_IDF = 1e-6


def idf_of(documents: int, df: int) -> float:
    """FTS5's idf (fts5_aux.c): ln((N - df + 0.5) / (df + 0.5)), at least MIN_IDF. Issue 36:
    Lucene's ln(1 + ...) used before gave a word in most documents a weight FTS5 does not."""
    if documents <= 0:
        return MIN_IDF
    # the document count and a word's count are read by separate statements: while an update
    # commits between them the word may be counted in more documents than the total was,
    # which FTS5 (one snapshot) never sees; ln of a negative ratio would raise
    df = min(df, documents)
    return max(MIN_IDF, math.log((documents - df + 0.5) / (df + 0.5)))


def _needs_check(query: LexQuery) -> bool:
    """Whether a row holding one of the scored clauses may still not match the query: a
    negation, or a clause of several terms scored apart (`positive_clauses`)."""
    return any(clause.negated for clause in query.clauses) or has_grouped_clause(query)


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
    """The top `limit` rows (META_COLUMNS, body, BM25 sum, leg, metadata) of `query`, best
    first; [] for a query with nothing to search or one PostgreSQL refuses. `trace` collects
    the tsquery each ranking statement read through GIN (tests show pruning happened)."""
    if limit <= 0 or not query.is_searchable:
        return []
    text = render_tsquery(query)
    clauses = positive_clauses(query)
    if text is None or not clauses:
        return []
    checked = _needs_check(query)
    plan = _Plan(run, clauses, text, checked, sql_limit(limit), collection, within, trace)
    try:
        if exhaustive:
            return plan.exhaustive()
        if query.match_any and len(clauses) > 1:
            return plan.any_term(_Figures(run, clauses, clause_stats(run, clauses)))
        return plan.all_terms(_Figures(run, clauses, plan.stats_probing()))
    except psycopg.Error:
        return []


def filled_rows(
    run: Runner,
    query: LexQuery,
    limit: int,
    collection: str | None,
    within: frozenset[int] | None = None,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows `ranked_rows` gives for `query` with every term required and, when they fall
    short of `limit`, the any-term rows not among them that fill it (domain.lexfill), for
    the price of one search where it can (issue 26: the fill cost 1.86 times a search that
    needed none). The corpus figures are read once for both rules; when neither rule has a
    step of its own (no probe; the any-term rows few enough to rank all at once), one
    statement ranks both, the any-term rows only when the every-term rows fall short."""
    every_query = replace(query, match_any=False)
    text = render_tsquery(every_query)
    any_text = render_tsquery(replace(query, match_any=True))
    clauses = positive_clauses(every_query)
    if limit <= 0 or not query.is_searchable or text is None or any_text is None or not clauses:
        return [], []
    checked = _needs_check(query)
    limit = sql_limit(limit)
    every_plan = _Plan(run, clauses, text, checked, limit, collection, within, None)
    # every any-term row the fill could keep is among the best 2 * limit: the every-term rows
    # it leaves out are fewer than `limit`
    wide = sql_limit(2 * limit)
    any_plan = _Plan(run, clauses, any_text, checked, wide, collection, within, None)
    try:
        figures = _Figures(run, clauses, every_plan.stats_probing())
        leg = every_plan.every_leg(figures.stats)
        if (
            len(clauses) > 1
            and leg is not None
            and figures.stats.matched is not False
            and not every_plan.asks_apart(figures.stats)
            and len(any_plan.rarest_first(figures)) == len(clauses)
        ):
            rows = every_plan.ranked(
                figures.idf(), figures.stats, [leg, _Leg(any_text, None, wide)]
            )
            return [row for row in rows if row[10] == 0], [row for row in rows if row[10] == 1]
        every = every_plan.all_terms(figures)
    except psycopg.Error:
        return [], []
    if len(every) >= limit or len(clauses) < 2:  # (one clause: any term is every term)
        return every, []
    wanted = sql_limit(limit + len(every))
    try:
        wider = _Plan(run, clauses, any_text, checked, wanted, collection, within, None).any_term(
            figures
        )
    except psycopg.Error:
        return every, []
    seen = {row[0] for row in every}  # the document id (META_COLUMNS)
    return every, [row for row in wider if row[0] not in seen][: limit - len(every)]


@dataclass(frozen=True)
class MatchProbe:
    """An all-terms query's text and where it is searched: `clause_stats` also says whether
    any row there matches it."""

    text: str
    collection: str | None
    within: frozenset[int] | None


def clause_stats(
    run: Runner, clauses: Sequence[str], probe: MatchProbe | None = None
) -> ClauseStats:
    """One statement: N and the average length (`fts_stats`), and each clause's kept df and
    bound. A clause parsing to one lexeme prints as 'lexeme', a prefix as 'lexeme':* (folded
    lexemes hold letters and digits only); anything else has neither.

    With `probe`, the same statement also says whether any row in its scope matches its text,
    reading GIN for the clauses `drivers` picks only. That tsquery is chosen in the statement,
    so the planner cannot see it: with the statistics an indexing run leaves
    (REQ-INDEX-FTS-TIDY-002) it reads GIN. Statements whose tsquery is known beforehand write
    it where the planner sees it (`_Plan._leg_rows`)."""
    params: list[Any] = [list(clauses)]
    statement = (
        "WITH q AS MATERIALIZED (SELECT c.i, x.q, x.q::text AS t, numnode(x.q) AS n"
        " FROM unnest(%s::text[]) WITH ORDINALITY AS c(clause, i),"
        f" LATERAL (SELECT {tsquery_sql('c.clause')} AS q) x),"
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
        rows, where = scoped_rows(probe.collection, probe.within, params)
        # the rule of `drivers`, in SQL: the rarest clauses by bound (a NULL bound never)
        statement += (
            ", r AS MATERIALIZED (SELECT (array_agg(s.q ORDER BY s.bound, s.i))"
            f"[1:{MAX_DRIVERS}] AS qs FROM s"
            f" WHERE s.bound <= {DRIVER_SPREAD} * (SELECT MIN(bound) FROM s)),"
            " e AS MATERIALIZED (SELECT COALESCE(r.qs[1] && COALESCE(r.qs[2], r.qs[1])"
            " && COALESCE(r.qs[3], r.qs[1]),"
            f" {tsquery_sql()}) AS driver,"
            f" {tsquery_sql()} AS everything FROM r),"
            # a CTE is planned for all its rows: with LIMIT 1 on the scan itself the
            # planner hopes for an early hit and reads the whole table
            f" m AS MATERIALIZED (SELECT f.id FROM e, {rows}"
            f" WHERE f.tsv @@ e.driver AND ts_match_vq(f.tsv, e.everything){where})"
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


def scoped_rows(
    collection: str | None, within: frozenset[int] | None, params: list[Any]
) -> tuple[str, str]:
    """(the rows searched, the scope's conditions to follow a WHERE's first): `documents_fts
    f`, joined to `documents d` only for a collection (the table holds active documents
    alone, and the join cost 40 % of ranking 245 rows); the conditions' values appended to
    `params`."""
    rows, where = "documents_fts f", ""
    if collection:
        rows += " JOIN documents d ON d.id = f.id"
        where += " AND d.collection = %s AND d.active = 1"
        params.append(collection)
    if within is not None:
        where += " AND f.id = ANY(%s)"
        params.append(sorted(within))
    return rows, where


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
    parsed = ", ".join(f"{tsquery_sql()} AS q{i}" for i in range(len(clauses)))
    counts = ", ".join(f"COUNT(*) FILTER (WHERE f.tsv @@ q.q{i})" for i in range(len(clauses)))
    anything = " | ".join(f"({clause})" for clause in clauses)
    # the union in the condition as a value the planner sees (see `_Plan.ranked`)
    rows = run(
        f"WITH q AS MATERIALIZED (SELECT {parsed})"
        f" SELECT {counts} FROM documents_fts f, q WHERE f.tsv @@ {tsquery_sql()}",
        [*clauses, anything],
    )
    return [int(df or 0) for df in rows[0]]


def _frequency(clause: str, i: int) -> str:
    """The clause's weighted frequency in row `f`, in units of one body occurrence: each
    occurrence counts its column's weight, as FTS5's bm25 counts hits (issue 36: `ts_rank`,
    used before, adds w / j^2 for the j-th occurrence, so ten occurrences counted as 1.6 and
    a page about a word lost to one that names it once in its title).

    A phrase or several-word clause counts only on rows it matches: BM25 (and FTS5) count a
    phrase only where it occurs, and MaxScore's bound rests on that (a row without the clause
    gains nothing from it). A single word or prefix counts 0 where absent anyway."""
    rank = f"ts_rank_cd('{FTS_WEIGHTS}', f.tsv, q.q{i}, 0) / {ONE_BODY_OCCURRENCE}"
    if " <-> " in clause or " & " in clause:
        rank = f"CASE WHEN f.tsv @@ q.q{i} THEN {rank} ELSE 0 END"
    return f"{rank} AS t{i}"


def _either(clauses: Sequence[str], chosen: Sequence[int]) -> str:
    return " | ".join(f"({clauses[i]})" for i in chosen)


def _both(clauses: Sequence[str], chosen: Sequence[int]) -> str:
    return " & ".join(f"({clauses[i]})" for i in chosen)


class _Figures:
    """A query's corpus figures, and its clauses' idf from them, counted at most once (a df
    the index does not keep is counted) for however many plans rank with them."""

    def __init__(self, run: Runner, clauses: Sequence[str], stats: ClauseStats) -> None:
        self.run = run
        self.clauses = clauses
        self.stats = stats
        self._idf: list[float] | None = None
        self._df: list[int] = []

    def idf(self) -> list[float]:
        if self._idf is None:
            frequencies: list[int] = [0 if df is None else df for df in self.stats.kept]
            unknown = [i for i, df in enumerate(self.stats.kept) if df is None]
            if unknown:
                counted = counted_df(self.run, [self.clauses[i] for i in unknown])
                for i, df in zip(unknown, counted, strict=True):
                    frequencies[i] = df
            self._idf = [idf_of(self.stats.documents, df) for df in frequencies]
            self._df = frequencies
        return self._idf

    def df(self) -> list[int]:
        self.idf()
        return self._df


@dataclass(frozen=True)
class _Leg:
    """One ranking: the rows GIN finds for `driver` that also match `check` (when given),
    ranked by BM25 over every clause, the best `limit`."""

    driver: str
    check: str | None
    limit: int


class _Plan:
    def __init__(
        self,
        run: Runner,
        clauses: Sequence[str],
        text: str,
        checked: bool,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None,
        trace: list[str] | None,
    ) -> None:
        self.run = run
        self.clauses = list(clauses)
        self.text = text
        self.checked = checked
        self.limit = limit
        self.collection = collection
        self.within = within
        self.trace = trace

    # -- plans ----------------------------------------------------------------------------------

    def exhaustive(self) -> list[tuple[Any, ...]]:
        stats = clause_stats(self.run, self.clauses)
        counted = counted_df(self.run, self.clauses)
        idf = [idf_of(stats.documents, df) for df in counted]
        return self.ranked(idf, stats, [_Leg(self.text, None, self.limit)])

    def every_leg(self, stats: ClauseStats) -> _Leg | None:
        """The ranking of an all-terms query, driven by its rarest clauses; None when a
        clause no document holds leaves nothing to rank."""
        if 0 in stats.bounds:
            return None
        chosen = drivers(stats.bounds)
        if chosen and len(chosen) < len(self.clauses):
            return _Leg(_both(self.clauses, chosen), self.text, self.limit)
        return _Leg(self.text, None, self.limit)

    def stats_probing(self) -> ClauseStats:
        """The clauses' figures for an all-terms query; from PROBE_CLAUSES clauses on, the
        same statement asks whether anything matches: many clauses seldom all match, and the
        answer comes before any df is counted and before the long ranking statement (10 ms
        to plan for ten clauses) runs."""
        probe = None
        if len(self.clauses) >= PROBE_CLAUSES:
            probe = MatchProbe(self.text, self.collection, self.within)
        return clause_stats(self.run, self.clauses, probe)

    def asks_apart(self, stats: ClauseStats) -> bool:
        """Whether a shorter all-terms query with a df to count asks first, in a statement
        of its own, whether anything matches (the count reads every row holding any of its
        words); one whose frequencies are all kept ranks at once (nothing matching: nothing
        ranked)."""
        return stats.matched is None and None in stats.kept

    def all_terms(self, figures: _Figures) -> list[tuple[Any, ...]]:
        leg = self.every_leg(figures.stats)
        if leg is None or figures.stats.matched is False:
            return []
        if self.asks_apart(figures.stats) and not self.matches(leg):
            return []
        return self.ranked(figures.idf(), figures.stats, [leg])

    def matches(self, leg: _Leg) -> bool:
        """Whether any row in scope that GIN finds for the leg's driver also matches its
        check."""
        params: list[Any] = [leg.driver]
        rows, where = scoped_rows(self.collection, self.within, params)
        statement = f"SELECT EXISTS (SELECT 1 FROM {rows} WHERE f.tsv @@ {tsquery_sql()}{where}"
        if leg.check is not None:
            # a subquery is evaluated once; the function itself would be run on every row
            statement += f" AND ts_match_vq(f.tsv, (SELECT {tsquery_sql()})))"
            params.append(leg.check)
        else:
            statement += ")"
        return bool(self.run(statement, params)[0][0])

    def rarest_first(self, figures: _Figures) -> list[int]:
        """The clauses an any-term query ranks first: the rarest, until they reach about 20
        rows per result."""
        df = figures.df()
        first: list[int] = []
        reach = 0.0
        for i in sorted(range(len(self.clauses)), key=lambda i: (df[i], i)):
            first.append(i)
            reach += df[i]
            if reach >= 20 * self.limit:
                break
        return first

    def any_term(self, figures: _Figures) -> list[tuple[Any, ...]]:
        """The top rows of an any-term query, ranking only rows that can reach them (the
        module's docstring)."""
        stats, idf = figures.stats, figures.idf()
        # the whole query is checked on the candidates only when a negation must hold or a
        # clause's parts are scored apart
        check = self.text if self.checked else None
        everything = [_Leg(self.text, None, self.limit)]
        first = self.rarest_first(figures)
        if len(first) == len(self.clauses):
            return self.ranked(idf, stats, everything)
        rows = self.ranked(idf, stats, [_Leg(_either(self.clauses, first), check, self.limit)])
        if len(rows) < self.limit:  # no floor: rank everything
            return self.ranked(idf, stats, everything)
        theta = float(rows[-1][9])
        bound = [weight * (BM25_K1 + 1) for weight in idf]
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
            return self.ranked(idf, stats, everything)
        driver = _either(self.clauses, sorted(essential))
        return self.ranked(idf, stats, [_Leg(driver, check, self.limit)])

    # -- the ranking statement ----------------------------------------------------------------

    def ranked(
        self, idf: Sequence[float], stats: ClauseStats, legs: Sequence[_Leg]
    ) -> list[tuple[Any, ...]]:
        """The first leg's rows, then, only when they fall short of its limit, the second
        leg's rows that are not among them, up to that limit (a fill in the same statement),
        ranked by BM25 over every clause: meta columns, body, rank, the leg's number, metadata."""
        if self.trace is not None:
            self.trace += [leg.driver for leg in legs]
        clauses = self.clauses
        # the queries are parsed once (a MATERIALIZED CTE), not once per matching row
        parsed = [f"{tsquery_sql()} AS q{i}" for i in range(len(clauses))]
        params: list[Any] = [*clauses]
        for n, leg in enumerate(legs):
            if leg.check is not None:
                parsed.append(f"{tsquery_sql()} AS check{n}")
                params.append(leg.check)
        statement = f"WITH q AS MATERIALIZED (SELECT {', '.join(parsed)})"
        for n, leg in enumerate(legs):
            # a second leg runs only when the first fell short (its scan is never started)
            short = f" AND (SELECT COUNT(*) FROM leg0) < {int(legs[0].limit)}" if n else ""
            statement += f", leg{n} AS ({self._leg_rows(idf, stats, leg, n, short, params)})"
        statement += ", top AS (SELECT id, rank, 0 AS leg FROM leg0"
        if len(legs) > 1:  # as many as fill the first leg's limit, no more bodies fetched
            statement += (
                " UNION ALL (SELECT id, rank, 1 FROM leg1 WHERE id NOT IN (SELECT id FROM leg0)"
                f" ORDER BY rank DESC, id LIMIT {int(legs[0].limit)} - (SELECT COUNT(*) FROM leg0))"
            )
        # the bodies joined to the few rows kept: a common word matches thousands of rows,
        # and fetching each one's content before the sort cost a third of a ten-word query's
        # time at 100,000 documents
        # and each row's metadata with it (REQ-FILTER-006): a page of results needs no
        # statement (a round trip) of its own
        statement += (
            f") SELECT {META_COLUMNS}, content.doc, top.rank, top.leg, m.metadata"
            " FROM top JOIN documents d ON d.id = top.id"
            " JOIN content ON content.hash = d.hash"
            " LEFT JOIN py_document_metadata m ON m.doc_id = d.id"
            " ORDER BY top.leg, top.rank DESC, d.id"
        )
        return self.run(statement, params)

    def _leg_rows(
        self,
        idf: Sequence[float],
        stats: ClauseStats,
        leg: _Leg,
        n: int,
        condition: str,
        params: list[Any],
    ) -> str:
        """A leg's best rows (id, rank), its values appended to `params` in their order."""
        # BM25 per clause: tf = the clause's weighted frequency (ts_rank_cd without
        # normalisation, in units of one body occurrence), saturated by k1 and normalised by
        # the document's length against the average:
        # idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg))
        k1, b = BM25_K1, BM25_B
        terms = " + ".join(
            f"%s * (tf.t{i} * {k1 + 1} / (tf.t{i} + {k1} * (1 - {b} + {b} * f.len / %s)))"
            for i in range(len(self.clauses))
        )
        for weight in idf:
            params += [weight, stats.average]
        frequencies = ", ".join(_frequency(clause, i) for i, clause in enumerate(self.clauses))
        # ts_match_vq is @@ as a function: a condition no index takes, so GIN reads the
        # driver's postings only and the check runs on the rows they give
        checked = f" AND ts_match_vq(f.tsv, q.check{n})" if leg.check is not None else ""
        params.append(leg.driver)
        rows, where = scoped_rows(self.collection, self.within, params)
        params.append(int(leg.limit))
        return (
            f"SELECT f.id, ({terms}) AS rank FROM {rows}, q,"
            # OFFSET 0 keeps the subquery whole: pulled up, each ts_rank was run twice (the
            # sum names each frequency twice)
            f" LATERAL (SELECT {frequencies} OFFSET 0) tf"
            # the driver written in the condition, a value the planner sees: read from the
            # CTE, it was unknown, and at 5,000 documents the planner scanned every row (17 ms,
            # each tsvector detoasted) instead of reading GIN (0.1 ms)
            f" WHERE f.tsv @@ {tsquery_sql()}{checked}{where}{condition}"
            " ORDER BY rank DESC, f.id LIMIT %s"
        )
