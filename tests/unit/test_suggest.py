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
