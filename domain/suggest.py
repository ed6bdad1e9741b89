"""Levenshtein suggestions for documents that were not found."""

from __future__ import annotations

from collections.abc import Iterable


def _utf16_units(text: str) -> list[int]:
    # The original compares JavaScript strings, i.e. UTF-16 code units.
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def levenshtein(a: str, b: str) -> int:
    """Classic edit distance (insert, delete, substitute cost 1) over UTF-16 code units."""
    left, right = _utf16_units(a), _utf16_units(b)
    if not left:
        return len(right)
    if not right:
        return len(left)
    previous = list(range(len(right) + 1))
    for i, unit in enumerate(left, start=1):
        current = [i]
        for j, other in enumerate(right, start=1):
            cost = 0 if unit == other else 1
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost))
        previous = current
    return previous[-1]


def similar_paths(query: str, paths: Iterable[str], max_distance: int, limit: int) -> list[str]:
    """Case-insensitive distance; keep <= max_distance, nearest first, stable for ties."""
    lowered_query = query.lower()
    scored = [(levenshtein(path.lower(), lowered_query), path) for path in paths]
    kept = [item for item in scored if item[0] <= max_distance]
    kept.sort(key=lambda item: item[0])  # stable, like Array.prototype.sort
    return [path for _, path in kept[: max(0, limit)]]
