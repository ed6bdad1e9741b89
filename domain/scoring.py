"""Score arithmetic shared by every search surface."""

from __future__ import annotations


def js_round(value: float) -> int:
    """JavaScript `Math.round`: halves round towards +infinity (-2.5 -> -2, 2.5 -> 3)."""
    raise NotImplementedError


def round_score(score: float) -> float:
    """`Math.round(score * 100) / 100` exactly as JavaScript computes it (0.845 -> 0.85)."""
    raise NotImplementedError


def percent(score: float) -> int:
    """`Math.round(score * 100)`, the figure shown as `85%`."""
    raise NotImplementedError


def normalize_bm25(raw: float) -> float:
    """FTS5 bm25 (negative, lower is better) to [0, 1): |x| / (1 + |x|)."""
    raise NotImplementedError
