"""Score arithmetic shared by every search surface."""

from __future__ import annotations

import math


def js_round(value: float) -> int:
    """JavaScript `Math.round`: halves round towards +infinity (-2.5 -> -2, 2.5 -> 3).

    Computed from the exact fractional part rather than `floor(x + 0.5)`, because the
    addition itself can round (0.49999999999999994 + 0.5 == 1.0, yet JS gives 0).
    Non-finite input has no integer value and raises ValueError.
    """
    if not math.isfinite(value):
        raise ValueError(f"cannot round {value!r} to an integer")
    floor = math.floor(value)
    # value - floor is exact for doubles, so this comparison is too.
    return floor + 1 if value - floor >= 0.5 else floor


def round_score(score: float) -> float:
    """`Math.round(score * 100) / 100` exactly as JavaScript computes it.

    The product is taken in binary floating point as in JS, so the result follows the
    stored value, not the decimal literal: 0.845 * 100 is exactly 84.5 -> 0.85, while
    1.005 * 100 is 100.49999999999999 -> 1 (node prints the same).
    NaN and infinities pass through unchanged, as they do in JS.
    """
    if not math.isfinite(score):
        return score
    return js_round(score * 100) / 100


def percent(score: float) -> int:
    """`Math.round(score * 100)`, the figure shown as `85%`."""
    return js_round(score * 100)


def normalize_bm25(raw: float) -> float:
    """FTS5 bm25 (negative, lower is better) to [0, 1): |x| / (1 + |x|)."""
    magnitude = abs(raw)
    return magnitude / (1 + magnitude)
