"""picomatch-compatible glob matching and `multi_get` pattern classification."""

from __future__ import annotations

import re


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """picomatch defaults: `*`/`?` stay inside a segment, `**` crosses, `{a,b}`, `[...]`, no dotfiles."""
    raise NotImplementedError


def glob_match(pattern: str, path: str) -> bool:
    raise NotImplementedError


def is_comma_list(pattern: str) -> bool:
    """A comma list iff it contains `,` and none of `*`, `?`, `{`."""
    raise NotImplementedError


def split_comma_list(pattern: str) -> list[str]:
    """Items trimmed, empty items dropped."""
    raise NotImplementedError


def split_glob_mask(mask: str) -> list[str]:
    """Split a collection mask on top-level commas (not inside `{}` or `[]`)."""
    raise NotImplementedError
