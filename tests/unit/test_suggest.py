"""Levenshtein distance and "did you mean" suggestions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.suggest import levenshtein, similar_paths


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("", "", 0),
        ("", "abc", 3),
        ("abc", "", 3),
        ("kitten", "sitting", 3),
        ("flaw", "lawn", 2),
        ("engineering/api/authentcation.md", "engineering/api/authentication.md", 1),
        ("中文.md", "中文笔记.md", 2),
        ("😀", "a", 2),  # JS strings: an emoji is two UTF-16 code units
        ("a😀", "a😁", 1),  # same high surrogate, only the low one differs
    ],
)
def test_levenshtein(a: str, b: str, distance: int) -> None:
    assert levenshtein(a, b) == distance


PATHS = [
    "engineering/api/authentication.md",
    "engineering/api/rate-limits.md",
    "README.md",
    "notes/upper case name.md",
    "Engineering/API/Authentication.md",
]


@pytest.mark.parametrize(
    ("query", "max_distance", "limit", "expected"),
    [
        (
            "engineering/api/authentcation.md",
            5,
            5,
            ["engineering/api/authentication.md", "Engineering/API/Authentication.md"],
        ),
        (
            "ENGINEERING/API/AUTHENTICATION.MD",
            0,
            5,
            ["engineering/api/authentication.md", "Engineering/API/Authentication.md"],
        ),
        ("engineering/api/authentcation.md", 5, 1, ["engineering/api/authentication.md"]),
        ("readme.md", 5, 5, ["README.md"]),
        ("notes/upper-case-name.md", 5, 3, ["notes/upper case name.md"]),
        ("nothing/like/this.txt", 5, 5, []),
        ("readme.md", 5, 0, []),
    ],
)
def test_similar_paths(query: str, max_distance: int, limit: int, expected: list[str]) -> None:
    assert similar_paths(query, PATHS, max_distance, limit) == expected


def test_similar_paths_nearest_first() -> None:
    assert similar_paths("abcd", ["abxx", "abcx", "abcd"], 5, 5) == ["abcd", "abcx", "abxx"]


_short = st.text(max_size=12)


@given(_short, _short, _short)
def test_metric_properties(a: str, b: str, c: str) -> None:
    assert levenshtein(a, b) == levenshtein(b, a)
    assert (levenshtein(a, b) == 0) == (a == b)
    assert levenshtein(a, c) <= levenshtein(a, b) + levenshtein(b, c)


def _naive(query: str, paths: list[str], max_distance: int, limit: int) -> list[str]:
    """The original's rule, spelled out: every path's full distance, then filter and sort."""
    scored = [(levenshtein(p.lower(), query.lower()), p) for p in paths]
    kept = sorted((item for item in scored if item[0] <= max_distance), key=lambda i: i[0])
    return [p for _, p in kept[:limit]]


_alphabet = st.sampled_from(list("abcAB/._-😀中"))
_word = st.text(alphabet=_alphabet, max_size=14)


@given(_word, st.lists(_word, max_size=12), st.integers(0, 6), st.integers(0, 6))
def test_the_bounded_search_gives_the_original_answer(
    query: str, paths: list[str], max_distance: int, limit: int
) -> None:
    assert similar_paths(query, paths, max_distance, limit) == _naive(
        query, paths, max_distance, limit
    )


@given(_word, _word, st.integers(0, 8))
def test_bounded_levenshtein_agrees_below_the_bound(a: str, b: str, bound: int) -> None:
    from domain.suggest import _units, bounded_levenshtein

    exact = levenshtein(a, b)
    assert bounded_levenshtein(_units(a), _units(b), bound) == (exact if exact <= bound else None)


@given(st.lists(_word, max_size=5), st.lists(_word, max_size=12), st.integers(0, 6))
def test_a_reused_index_answers_as_a_fresh_one(
    queries: list[str], paths: list[str], max_distance: int
) -> None:
    from domain.suggest import NameIndex

    index = NameIndex(paths)  # the first misses scan, later ones use the bigram index
    for query in [*queries, *queries]:
        assert index.similar(query, max_distance, 5) == _naive(query, paths, max_distance, 5)
