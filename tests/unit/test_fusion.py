"""Reciprocal-rank fusion and position-aware blending."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.fusion import RRF_K, Fused, blend, blend_weight, reciprocal_rank_fusion

# (lists, weights, [(key, score)]) as the original's reciprocalRankFusion returns them.
ORIGINAL = [
    (
        [["a", "b", "c"], ["b", "a"]],
        [2, 1],
        [["a", 0.09891591750396617], ["b", 0.09865150713907986], ["c", 0.05174603174603175]],
    ),
    (
        [["a", "b", "c", "d", "e"]],
        [1],
        [
            ["a", 0.06639344262295083],
            ["b", 0.03612903225806452],
            ["c", 0.035873015873015876],
            ["d", 0.015625],
            ["e", 0.015384615384615385],
        ],
    ),
    (
        [["x", "y"], ["y", "x"], ["z"]],
        [1, 1, 1],
        [["x", 0.08252247488101534], ["y", 0.08252247488101534], ["z", 0.06639344262295083]],
    ),
    (
        [["d1", "d2", "d3", "d4"], ["d4", "d3", "d2", "d1"], ["d5", "d1"]],
        [2, 1, 1],
        [
            ["d1", 0.11454091750396615],
            ["d4", 0.09764344262295083],
            ["d2", 0.06813108038914491],
            ["d3", 0.06787506400409626],
            ["d5", 0.06639344262295083],
        ],
    ),
    ([["a", "a", "b"]], [1], [["a", 0.08252247488101534], ["b", 0.035873015873015876]]),
    (
        [["p", "q"], ["r", "s"]],
        [],
        [
            ["p", 0.06639344262295083],
            ["r", 0.06639344262295083],
            ["q", 0.03612903225806452],
            ["s", 0.03612903225806452],
        ],
    ),
    ([[], ["k"]], [2, 1], [["k", 0.06639344262295083]]),
]


@pytest.mark.parametrize(("lists", "weights", "expected"), ORIGINAL)
def test_matches_original_scores_and_order(
    lists: list[list[str]], weights: list[float], expected: list[list[object]]
) -> None:
    fused = reciprocal_rank_fusion(lists, weights)
    assert [[f.key, f.score] for f in fused] == expected


def test_best_rank_is_one_based_minimum() -> None:
    fused = {f.key: f for f in reciprocal_rank_fusion([["a", "b", "c", "d"], ["d", "c"]], [1, 1])}
    assert [fused[k].best_rank for k in "abcd"] == [1, 2, 2, 1]


def test_formula_with_bonus() -> None:
    (only,) = reciprocal_rank_fusion([["x"]], [2.0])
    assert only == Fused("x", 2.0 / (RRF_K + 1) + 0.05, 1)
    fourth = reciprocal_rank_fusion([["a", "b", "c", "d"]], [1.0])[3]
    assert fourth.score == 1.0 / (RRF_K + 4)


def test_ties_keep_first_seen_order() -> None:
    fused = reciprocal_rank_fusion([["p", "q"], ["r", "s"]], [1.0, 1.0])
    assert [f.key for f in fused] == ["p", "r", "q", "s"]


def test_custom_k() -> None:
    (only,) = reciprocal_rank_fusion([["x"]], [1.0], k=0)
    assert only.score == 1.0 + 0.05


@pytest.mark.parametrize(
    ("rank", "weight"), [(1, 0.75), (3, 0.75), (4, 0.60), (10, 0.60), (11, 0.40), (40, 0.40)]
)
def test_blend_weight(rank: int, weight: float) -> None:
    assert blend_weight(rank) == weight


@pytest.mark.parametrize(
    ("rank", "rerank", "expected"),
    [
        (1, 0.0, 0.75),
        (1, 1.0, 1.0),
        (2, 0.5, 0.75 * 0.5 + 0.25 * 0.5),
        (4, 1.0, 0.6 * 0.25 + 0.4),
        (20, 0.9, 0.4 * 0.05 + 0.6 * 0.9),
    ],
)
def test_blend(rank: int, rerank: float, expected: float) -> None:
    assert blend(rank, rerank) == pytest.approx(expected, rel=1e-15)


_keys = st.lists(st.integers(0, 30), unique=True, max_size=12)


@given(st.lists(_keys, min_size=1, max_size=5), st.randoms())
def test_permutation_invariant_over_equal_weight_lists(lists: list[list[int]], rnd: object) -> None:
    shuffled = list(lists)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    before = {f.key: f.score for f in reciprocal_rank_fusion(lists, [1.0] * len(lists))}
    after = {f.key: f.score for f in reciprocal_rank_fusion(shuffled, [1.0] * len(lists))}
    assert before.keys() == after.keys()
    for key, score in before.items():
        assert after[key] == pytest.approx(score, rel=1e-12)


@given(st.lists(_keys, min_size=1, max_size=5))
def test_scores_positive_sorted_and_bonus_bounded(lists: list[list[int]]) -> None:
    fused = reciprocal_rank_fusion(lists, [1.0] * len(lists))
    assert [f.score for f in fused] == sorted((f.score for f in fused), reverse=True)
    for item in fused:
        base = sum(1.0 / (RRF_K + lst.index(item.key) + 1) for lst in lists if item.key in lst)
        bonus = item.score - base
        assert item.score > 0
        assert -1e-12 <= bonus <= 0.05 + 1e-12
        assert bonus == pytest.approx(
            {1: 0.05, 2: 0.02, 3: 0.02}.get(item.best_rank, 0.0), abs=1e-12
        )


@given(_keys.filter(lambda k: len(k) >= 2))
def test_monotone_in_rank_within_one_list(keys: list[int]) -> None:
    fused = reciprocal_rank_fusion([keys], [1.0])
    assert [f.key for f in fused] == keys
    scores = [f.score for f in fused]
    assert all(a > b for a, b in itertools.pairwise(scores))


@given(st.integers(1, 200), st.floats(0, 1), st.floats(0, 1))
def test_blend_monotone_in_rerank_score(rank: int, low: float, high: float) -> None:
    low, high = min(low, high), max(low, high)
    assert blend(rank, low) <= blend(rank, high)


def test_a_rank_offset_lowers_a_list_and_takes_away_its_top_rank_bonus() -> None:
    from domain.fusion import reciprocal_rank_fusion, rrf_contributions

    lists = [["vec-top", "both"], ["filler", "both"]]
    plain = {f.key: f.score for f in reciprocal_rank_fusion(lists, [2.0, 2.0])}
    assert plain["filler"] == pytest.approx(2 / 61 + 0.05)  # ties the vector list's top
    shifted = reciprocal_rank_fusion(lists, [2.0, 0.25], rank_offsets=[0, 10])
    scores = {f.key: f.score for f in shifted}
    assert scores["filler"] == pytest.approx(0.25 / 71)  # rank 11: no bonus
    assert shifted[0].key == "vec-top"
    traces = rrf_contributions(lists, [2.0, 0.25], rank_offsets=[0, 10])
    assert [c.rank for c in traces["both"]] == [2, 2]  # the place in each list
    assert sum(c.contribution for c in traces["both"]) + 0.02 == pytest.approx(scores["both"])
