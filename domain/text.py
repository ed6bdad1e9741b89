"""Titles, line numbering, contexts and content hashes."""

from __future__ import annotations

from collections.abc import Mapping


def content_hash(body: str) -> str:
    """sha256 hex of the UTF-8 body (the original's content address)."""
    raise NotImplementedError


def extract_title(body: str, filename: str) -> str:
    """First `#`/`##` heading for .md files ("Notes" defers to the next `##`); else the stem."""
    raise NotImplementedError


def add_line_numbers(text: str, start: int = 1) -> str:
    """Prefix every line with `N: ` starting at `start`."""
    raise NotImplementedError


def resolve_context(
    global_context: str | None, contexts: Mapping[str, str], path: str
) -> str | None:
    """Global context first, then every matching prefix, shortest first, joined by a blank line.

    `path` is collection-relative; a prefix matches when "/" + path starts with "/" + prefix
    (plain string prefix, so `work` also matches `workshop.md`); "" and "/" match everything.
    """
    raise NotImplementedError


def slice_lines(body: str, from_line: int | None, max_lines: int | None) -> str:
    """Lines [from-1, from-1+max) of the body; `from_line` is clamped to >= 1."""
    raise NotImplementedError
