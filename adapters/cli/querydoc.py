"""`qmd query` documents: typed `lex:` / `vec:` / `hyde:` lines and an optional `intent:`.

The grammar and the error wording follow the original CLI (`docs/SYNTAX.md`): a single
untyped line (or a lone `expand:` line) is a plain query to expand; otherwise every
non-blank line needs a prefix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

from adapters.cli.errors import CommandError
from domain.model import SubQuery, SubQueryType

_TYPED = re.compile(r"^(lex|vec|hyde):\s*", re.IGNORECASE)
_EXPAND = re.compile(r"^expand:\s*", re.IGNORECASE)
_INTENT = re.compile(r"^intent:\s*", re.IGNORECASE)


@dataclass(frozen=True)
class QueryDocument:
    """Typed searches (with their 1-based line numbers), or a lone `expand:` text."""

    searches: tuple[SubQuery, ...] = ()
    lines: tuple[int, ...] = ()
    intent: str | None = None
    expand: str | None = None


def parse_query_document(text: str) -> QueryDocument | None:
    """None for a plain single-line query; raises CommandError for a malformed document."""
    numbered = [
        (number, line.strip())
        for number, line in enumerate(text.split("\n"), start=1)
        if line.strip()
    ]
    if not numbered:
        return None
    searches: list[SubQuery] = []
    lines: list[int] = []
    intent: str | None = None
    for number, line in numbered:
        if _EXPAND.match(line):
            if len(numbered) > 1:
                raise CommandError(
                    f"Line {number} starts with expand:, but query documents cannot mix "
                    "expand with typed lines. Submit a single expand query instead."
                )
            rest = _EXPAND.sub("", line, count=1).strip()
            if not rest:
                raise CommandError("expand: query must include text.")
            return QueryDocument(expand=rest)
        if _INTENT.match(line):
            if intent is not None:
                raise CommandError(
                    f"Line {number}: only one intent: line is allowed per query document."
                )
            rest = _INTENT.sub("", line, count=1).strip()
            if not rest:
                raise CommandError(f"Line {number}: intent: must include text.")
            intent = rest
            continue
        typed = _TYPED.match(line)
        if typed:
            kind = typed.group(1).lower()
            rest = line[typed.end() :].strip()
            if not rest:
                raise CommandError(f"Line {number} ({kind}:) must include text.")
            searches.append(SubQuery(cast(SubQueryType, kind), rest))
            lines.append(number)
            continue
        if len(numbered) == 1:
            return None
        raise CommandError(
            f"Line {number} is missing a lex:/vec:/hyde:/intent: prefix. "
            "Each line in a query document must start with one."
        )
    if intent is not None and not searches:
        raise CommandError(
            "intent: cannot appear alone. Add at least one lex:, vec:, or hyde: line."
        )
    if not searches:
        return None
    return QueryDocument(tuple(searches), tuple(lines), intent)
