"""The PostgreSQL lexical search's shortcuts (adapters/postgres/bm25.py) never change an
answer: on random corpora and random queries, all-terms queries driven by their rarest
clauses and any-term queries pruned by MaxScore give exactly the rows and scores of ranking
every matching row with every document frequency counted (`exhaustive=True`)."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from adapters.postgres import bm25
from adapters.postgres.lexical import hit_from_row
from adapters.postgres.store import PostgresIndex
from adapters.postgres.tsquery import render_tsquery
from domain.lexfill import filled_by_two_searches
from domain.lexquery import parse_lex_query
from tests.postgres_server import drop_schema, fresh_schema_url

pytestmark = pytest.mark.postgres
T0 = "2025-01-01T00:00:00.000Z"
# a1 is a prefix of a10..a19: bare words are prefix terms, so clauses of one lexeme, of a
# prefix several complete, phrases and negations all occur
VOCABULARY = [f"{letter}{n}" for letter in "abc" for n in range(25)]


def _corpus(index: PostgresIndex, seed: int, documents: int) -> None:
    rng = random.Random(seed)
    # Zipf-like: a few words in most documents, most words in few
    weights = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
    rng.shuffle(weights)
    with index.transaction():
        for n in range(documents):
            words = rng.choices(VOCABULARY, weights, k=rng.randint(3, 40))
            title = " ".join(rng.choices(VOCABULARY, weights, k=2))
            collection = "a" if n % 3 else "b"
            index.upsert_document(
                collection, f"d{n}.md", title, f"h{seed}-{n}", " ".join(words), T0, T0
            )


_term = st.one_of(
    st.sampled_from(VOCABULARY),  # a prefix term
    st.sampled_from(VOCABULARY).map(lambda w: f'"{w}"'),  # one exact lexeme
    st.tuples(st.sampled_from(VOCABULARY), st.sampled_from(VOCABULARY)).map(
        lambda pair: f'"{pair[0]} {pair[1]}"'  # a phrase
    ),
    st.sampled_from(["zz9", "a", "b1"]),  # absent, and prefixes of many lexemes
)
_query = st.tuples(
    st.lists(_term, min_size=1, max_size=10),
    st.lists(st.sampled_from(VOCABULARY), max_size=2),  # negated
).map(lambda parts: " ".join(parts[0] + [f"-{w}" for w in parts[1]]))


@settings(
    max_examples=12,
    deadline=None,
    # no shrinking: each example builds a schema, and the failing one is printed as found
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 10_000),
    documents=st.integers(20, 120),
    queries=st.lists(
        st.tuples(
            _query,
            st.booleans(),
            st.sampled_from([1, 1, 2, 3, 5, 15]),  # small limits prune most
            st.sampled_from([None, "a"]),
            st.booleans(),
        ),
        min_size=4,
        max_size=8,
    ),
)
def test_pruned_top_k_equals_exhaustive_top_k(
    seed: int, documents: int, queries: list[tuple[str, bool, int, str | None, bool]]
) -> None:
    url, schema = fresh_schema_url()
    index = PostgresIndex.open(url, env={})
    try:
        _corpus(index, seed, documents)
        ids = [int(r[0]) for r in index._query("SELECT id FROM documents ORDER BY id", ())]
        for text, match_any, limit, collection, filtered in queries:
            query = replace(parse_lex_query(text), match_any=match_any)
            within = frozenset(ids[::2]) if filtered else None
            got = bm25.ranked_rows(index._query, query, limit, collection, within)
            want = bm25.ranked_rows(index._query, query, limit, collection, within, exhaustive=True)
            assert [(r[2], r[9]) for r in got] == [(r[2], r[9]) for r in want], (
                text,
                match_any,
                limit,
                collection,
                filtered,
            )
            # the fill in one call (the figures read once) against two exhaustive rankings
            every, fill = bm25.filled_rows(index._query, query, limit, collection, within)
            want_every, want_fill = filled_by_two_searches(
                lambda q, n, c=collection, w=within: [
                    hit_from_row(r)
                    for r in bm25.ranked_rows(index._query, q, n, c, w, exhaustive=True)
                ],
                query,
                limit,
            )
            assert [(r[2], r[9]) for r in every] == [
                (h.document.meta.path, -h.bm25) for h in want_every
            ], text
            assert [(r[2], r[9]) for r in fill] == [
                (h.document.meta.path, -h.bm25) for h in want_fill
            ], text
    finally:
        index.close()
        drop_schema(schema)


def test_an_all_terms_query_reads_only_its_rarest_clauses_and_still_ranks_alike() -> None:
    url, schema = fresh_schema_url()
    index = PostgresIndex.open(url, env={})
    try:
        _corpus(index, 3, 300)
        driven = found = 0
        for text in ("a1 b2", "a0 b0 c0", '"a3" b1 c2 a', "a b c", "a10 a11 a12 b0 -c0"):
            query = parse_lex_query(text)
            trace: list[str] = []
            got = bm25.ranked_rows(index._query, query, 10, None, trace=trace)
            want = bm25.ranked_rows(index._query, query, 10, None, exhaustive=True)
            assert [(r[2], r[9]) for r in got] == [(r[2], r[9]) for r in want], text
            found += len(got)
            driven += bool(trace) and trace[-1] != render_tsquery(query)
        assert found > 0 and driven > 0  # answers compared, and some read fewer clauses
    finally:
        index.close()
        drop_schema(schema)


def test_a_phrase_counts_only_in_rows_that_hold_it() -> None:
    """Two rows alike but for one holding the phrase's words apart: neither holds the phrase,
    so it adds nothing to either (ts_rank alone scored the nearer words; MaxScore's bound,
    and FTS5's BM25, count a phrase only where it occurs)."""
    url, schema = fresh_schema_url()
    index = PostgresIndex.open(url, env={})
    try:
        with index.transaction():
            for n, body in enumerate(
                ["alpha gamma beta delta", "alpha gamma epsilon delta", "alpha beta", "delta"]
            ):
                index.upsert_document("c", f"d{n}.md", "T", f"h{n}", body, T0, T0)
        query = replace(parse_lex_query('"alpha beta" delta'), match_any=True)
        for exhaustive in (False, True):
            scores = {
                str(r[2]): float(r[9])
                for r in bm25.ranked_rows(index._query, query, 10, None, exhaustive=exhaustive)
            }
            assert set(scores) == {"d0.md", "d1.md", "d2.md", "d3.md"}
            assert scores["d0.md"] == scores["d1.md"]
    finally:
        index.close()
        drop_schema(schema)


def test_every_statement_reading_the_rows_is_planned_through_gin() -> None:
    """The tsquery a statement reads GIN with is written in its condition, where the planner
    sees it. Read from a CTE it was unknown to the planner, which at 5,000 documents scanned
    every row instead (17 ms a statement, against 0.1 ms through GIN; issue 26). After an
    indexing run (REQ-INDEX-FTS-TIDY-002) every such statement reads GIN."""
    url, schema = fresh_schema_url()
    index = PostgresIndex.open(url, env={})
    rng = random.Random(26)
    common = [f"w{n}" for n in range(400)]
    try:
        with index.transaction():
            for n in range(3000):
                words = rng.choices(common, k=120)
                if n % 500 == 0:  # six documents hold the rare words, some together
                    words += ["kumquat", "quince", "plumcot"] if n % 1000 == 0 else ["kumquat"]
                if n % 1500 == 0:
                    words.append("plumbago")
                collection = "a" if n % 2 else "b"
                index.upsert_document(
                    collection, f"d{n}.md", f"T {n}", f"h{n}", " ".join(words), T0, T0
                )
        index.tidy_lexical_index(3000)  # as `collection add` ends: the pending list folded
        plans: list[str] = []
        probed = 0  # statements that read the figures and ask whether anything matches

        def explaining(statement: str, params: object) -> list[tuple[object, ...]]:
            nonlocal probed
            if "documents_fts f" in statement:
                rows = index._query("EXPLAIN " + statement, params)  # type: ignore[arg-type]
                plan = "\n".join(str(row[0]) for row in rows)
                if "fts_lexemes" in statement:  # its driver is chosen in SQL: see clause_stats
                    probed += 1
                    plan = plan.replace("tsv @@ e.driver", "tsv @@ (chosen in the statement)")
                plans.append(plan)
            return index._query(statement, params)  # type: ignore[arg-type]

        found = 0
        for text, match_any in (
            ("kumquat quince", False),  # every term (each a prefix): found together in three
            ('"kumquat" "quince" "w1"', False),  # exact words
            ("kumquat plum", False),  # a prefix two words complete: its df counted
            ('"kumquat" "w1" "w2" "w3" "w4"', False),  # asked first whether anything matches
            ("kumquat quince", True),
            ("quince plum", True),
        ):
            query = replace(parse_lex_query(text), match_any=match_any)
            for collection in (None, "a"):
                found += len(bm25.ranked_rows(explaining, query, 10, collection))
        assert found > 0 and len(plans) >= 12 and probed >= 2
        # the planner saw each tsquery GIN reads (a literal), not a CTE's column (`q.driver`)
        hidden = [plan for plan in plans if re.search(r"tsv @@ \w+\.\w+", plan)]
        assert not hidden, "\n\n".join(hidden)
        scanned = [plan for plan in plans if "Seq Scan on documents_fts" in plan]
        assert not scanned, "\n\n".join(scanned)
        unindexed = [plan for plan in plans if "idx_documents_fts" not in plan]
        assert not unindexed, "\n\n".join(unindexed)
    finally:
        index.close()
        drop_schema(schema)
