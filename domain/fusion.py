"""Reciprocal-rank fusion and position-aware blending (REQ-SEARCH-LEX-008, REQ-SEARCH-SCORE-001)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

RRF_K = 60


@dataclass(frozen=True)
class Fused(Generic[K]):
    """One key's fused score and its best rank over the lists."""

    key: K
    score: float
    best_rank: int  # 1-based best rank over all lists


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[K]],
    weights: Sequence[float],
    k: int = RRF_K,
    rank_offsets: Sequence[int] = (),
) -> list[Fused[K]]:
    """sum(w / (k + rank)) with rank 1-based; +0.05 for a rank-1 hit, +0.02 for best rank 2-3.

    Sorted by score descending; ties keep first-seen order. A missing weight counts as 1.0
    (as in the original); a key repeated within one list contributes once per occurrence.
    Sums are taken in list order so the floats equal the original's bit for bit.
    `rank_offsets[i]` (default 0) starts list i's ranks further down: a list that only fills
    in (the any-term matches) then neither outweighs nor earns the top-rank bonus.
    """
    scores: dict[K, float] = {}
    best_rank: dict[K, int] = {}
    for index, ranked in enumerate(ranked_lists):
        weight = weights[index] if index < len(weights) else 1.0
        offset = rank_offsets[index] if index < len(rank_offsets) else 0
        for position, key in enumerate(ranked):
            rank = position + 1 + offset
            contribution = weight / (k + rank)
            if key in scores:
                scores[key] += contribution
                best_rank[key] = min(best_rank[key], rank)
            else:
                scores[key] = contribution
                best_rank[key] = rank
    fused = [
        Fused(key=key, score=score + top_rank_bonus(best_rank[key]), best_rank=best_rank[key])
        for key, score in scores.items()
    ]
    fused.sort(key=lambda item: item.score, reverse=True)  # stable: ties keep first-seen
    return fused


@dataclass(frozen=True)
class RankContribution:
    """One list's share of a document's RRF score."""

    list_index: int
    rank: int  # 1-based
    weight: float
    contribution: float  # weight / (k + rank)


def rrf_contributions(
    ranked_lists: Sequence[Sequence[K]],
    weights: Sequence[float],
    k: int = RRF_K,
    rank_offsets: Sequence[int] = (),
) -> dict[K, list[RankContribution]]:
    """Per key, the contributions `reciprocal_rank_fusion` sums, in list order.

    Summing them in that order and adding `top_rank_bonus` of the best rank gives the fused
    score exactly. `rank` is the place in its own list; the contribution counts the offset.
    """
    traces: dict[K, list[RankContribution]] = {}
    for index, ranked in enumerate(ranked_lists):
        weight = weights[index] if index < len(weights) else 1.0
        offset = rank_offsets[index] if index < len(rank_offsets) else 0
        for position, key in enumerate(ranked):
            rank = position + 1
            entry = RankContribution(index, rank, weight, weight / (k + rank + offset))
            traces.setdefault(key, []).append(entry)
    return traces


def top_rank_bonus(best_rank: int) -> float:
    """+0.05 for a rank-1 hit in any list, +0.02 for a best rank of 2-3."""
    # Rewards documents some retriever put on top, which a plain rank sum underrates.
    if best_rank == 1:
        return 0.05
    if best_rank <= 3:
        return 0.02
    return 0.0


def blend_weight(rrf_rank: int) -> float:
    """0.75 for positions 1-3, 0.60 for 4-10, 0.40 beyond."""
    if rrf_rank <= 3:
        return 0.75
    if rrf_rank <= 10:
        return 0.60
    return 0.40


def blend(rrf_rank: int, rerank_score: float) -> float:
    """w * (1 / rrf_rank) + (1 - w) * rerank_score."""
    weight = blend_weight(rrf_rank)
    return weight * (1 / rrf_rank) + (1 - weight) * rerank_score
