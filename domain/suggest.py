"""Levenshtein suggestions for documents that were not found."""

from __future__ import annotations

from collections.abc import Iterable


def levenshtein(a: str, b: str) -> int:
    raise NotImplementedError


def similar_paths(query: str, paths: Iterable[str], max_distance: int, limit: int) -> list[str]:
    """Case-insensitive distance; keep <= max_distance, nearest first, stable for ties."""
    raise NotImplementedError
