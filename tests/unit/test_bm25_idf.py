"""PostgreSQL's idf (adapters/postgres/bm25.py) as FTS5 computes it, and on the figures a
concurrent update can hand it: the total and a word's count come from separate statements."""

from __future__ import annotations

import math

import pytest

from adapters.postgres.bm25 import MIN_IDF, idf_of


def test_idf_is_fts5s() -> None:
    assert idf_of(100, 10) == pytest.approx(math.log(90.5 / 10.5))
    assert idf_of(100, 60) == MIN_IDF  # a word in most documents: FTS5's floor
    assert idf_of(0, 0) == MIN_IDF


@pytest.mark.parametrize(("documents", "df"), [(3, 4), (1, 10), (5, 6)])
def test_a_word_counted_in_more_documents_than_the_total_is_the_floor(
    documents: int, df: int
) -> None:
    """A search while an update commits read df past N: it raised ValueError (math domain
    error), and the search answered 'internal error' (tests/e2e/test_postgres.py)."""
    assert idf_of(documents, df) == MIN_IDF
