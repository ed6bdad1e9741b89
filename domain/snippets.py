"""Snippet extraction with the `@@ -start,count @@ (B before, A after)` header."""

from __future__ import annotations

from domain.model import Snippet


def extract_snippet(
    body: str,
    query: str,
    max_len: int = 300,
    chunk_pos: int | None = None,
    chunk_len: int | None = None,
    intent: str | None = None,
) -> Snippet:
    """Best-matching line plus one before and two after, truncated to `max_len`."""
    raise NotImplementedError
