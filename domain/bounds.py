"""Bounds on the inputs that name documents (docs/spec REQ-BOUND-*, issue 11); a search
text's bounds are checked where it is parsed (`domain.lexquery.check_query`).

Each check raises `invalid-argument` naming the bound, so one hostile argument costs a
constant amount of work instead of minutes: SQLite refuses LIKE patterns over 50,000 bytes,
and a glob's cost grows with its wildcards. The limits sit far above what a person or an agent
types.
"""

from __future__ import annotations

from typing import Final

from domain.errors import INVALID_ARGUMENT, QmdError

MAX_PATTERN_CHARS: Final = 4096
MAX_PATTERN_WILDCARDS: Final = 64
MAX_REFERENCE_CHARS: Final = 4096
_WILDCARDS: Final = frozenset("*?[{(")


def check_pattern(pattern: str) -> None:
    """A multi_get pattern: at most MAX_PATTERN_CHARS characters and MAX_PATTERN_WILDCARDS
    wildcard characters (`*`, `?`, `[`, `{`, `(`), which bound the matcher's live states."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise QmdError(
            INVALID_ARGUMENT,
            f"pattern is too long: {len(pattern)} characters (at most {MAX_PATTERN_CHARS})",
        )
    wildcards = sum(1 for ch in pattern if ch in _WILDCARDS)
    if wildcards > MAX_PATTERN_WILDCARDS:
        raise QmdError(
            INVALID_ARGUMENT,
            f"pattern is too complex: {wildcards} wildcard characters "
            f"(at most {MAX_PATTERN_WILDCARDS})",
        )


def check_reference(reference: str) -> None:
    """A document path, `qmd://` URI or docid: at most MAX_REFERENCE_CHARS characters."""
    if len(reference) > MAX_REFERENCE_CHARS:
        raise QmdError(
            INVALID_ARGUMENT,
            f"document reference is too long: {len(reference)} characters "
            f"(at most {MAX_REFERENCE_CHARS})",
        )
