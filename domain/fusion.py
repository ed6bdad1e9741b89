"""Reciprocal-rank fusion and position-aware blending (req RANK-*)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

RRF_K = 60


@dataclass(frozen=True)
class Fused(Generic[K]):
    key: K
    score: float
    best_rank: int  # 1-based best rank over all lists


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[K]], weights: Sequence[float], k: int = RRF_K
) -> list[Fused[K]]:
    """sum(w / (k + rank)) with rank 1-based; +0.05 for a rank-1 hit, +0.02 for best rank 2-3.

    Sorted by score descending; ties keep first-seen order.
    """
    raise NotImplementedError


def blend_weight(rrf_rank: int) -> float:
    """0.75 for positions 1-3, 0.60 for 4-10, 0.40 beyond."""
    raise NotImplementedError


def blend(rrf_rank: int, rerank_score: float) -> float:
    """w * (1 / rrf_rank) + (1 - w) * rerank_score."""
    raise NotImplementedError
