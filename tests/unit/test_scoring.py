"""Score arithmetic must print exactly what QMD (JavaScript) prints.

Expectations were produced with node (`Math.round(x * 100) / 100`, `Math.round(x)`) and
frozen here so the suite needs no node.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.text import js_round, percent, round_score
from domain.usecases.search import normalize_bm25


@pytest.mark.parametrize(
    ("score", "rounded", "pct"),
    [
        (0, 0, 0),
        (1, 1, 100),
        (0.845, 0.85, 85),
        (1.005, 1, 100),
        (0.285, 0.28, 28),
        (0.125, 0.13, 13),
        (0.115, 0.12, 12),
        (0.555, 0.56, 56),
        (0.5, 0.5, 50),
        (0.994999, 0.99, 99),
        (0.995, 1, 100),
        (0.3333333333333333, 0.33, 33),
        (0.6666666666666666, 0.67, 67),
        (0.015, 0.02, 2),
        (0.045, 0.05, 5),
        (0.0049999, 0, 0),
        (0.005, 0.01, 1),
        (2.675, 2.68, 268),
        (-0.005, 0, 0),
        (-0.015, -0.01, -1),
        (-0.845, -0.84, -84),
        (0.9999, 1, 100),
        (1.5e-10, 0, 0),
        (123.455, 123.46, 12346),
        (0.07, 0.07, 7),
        (0.57, 0.57, 57),
        (0.29, 0.29, 29),
        (0.58, 0.58, 58),
    ],
)
def test_round_score_and_percent_match_node(score: float, rounded: float, pct: int) -> None:
    assert round_score(score) == rounded
    assert percent(score) == pct


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.5, 1),
        (1.5, 2),
        (2.5, 3),
        (-0.5, 0),
        (-1.5, -1),
        (-2.5, -2),
        (0.49999999999999994, 0),
        (-0.49999999999999994, 0),
        (4503599627370495.5, 4503599627370496),
        (-4503599627370495.5, -4503599627370495),
        (10000000000000000, 10000000000000000),
        (84.5, 85),
        (84.49999999999999, 84),
        (100.49999999999999, 100),
        (-1e-07, 0),
    ],
)
def test_js_round_matches_math_round(value: float, expected: int) -> None:
    assert js_round(value) == expected


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_js_round_rejects_non_finite(value: float) -> None:
    with pytest.raises(ValueError):
        js_round(value)


def test_round_score_passes_non_finite_through() -> None:
    assert math.isnan(round_score(math.nan))
    assert round_score(math.inf) == math.inf


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(-10.0, 10 / 11), (-2.0, 2 / 3), (-0.5, 1 / 3), (0.0, 0.0), (3.0, 0.75)],
)
def test_normalize_bm25(raw: float, expected: float) -> None:
    assert normalize_bm25(raw) == pytest.approx(expected, abs=0)


@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
def test_js_round_is_nearest_with_halves_up(value: float) -> None:
    result = js_round(value)
    assert result - 0.5 <= value < result + 0.5


@given(st.floats(min_value=-1e6, max_value=0, allow_nan=False))
def test_normalize_bm25_in_unit_interval_and_monotone(raw: float) -> None:
    score = normalize_bm25(raw)
    assert 0 <= score < 1
    assert normalize_bm25(raw - 1) >= score
