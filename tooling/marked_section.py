"""A generated block inside a hand-written document: the text between two marker lines is
rewritten from the code, the rest of the document is left as written (ARCHITECTURE.md's ports
table, docs/guide/cli.md's command table)."""

from __future__ import annotations

import sys
from pathlib import Path


def splice(text: str, start: str, end: str, block: str) -> str | None:
    """`text` with everything from `start` to `end` replaced by `block` (which carries both
    markers itself); None when a marker is missing."""
    if start not in text or end not in text:
        return None
    before, rest = text.split(start, 1)
    _old, after = rest.split(end, 1)
    return before + block + after


def write_or_check(document: Path, start: str, end: str, block: str, check: bool) -> int:
    """Rewrite the block in `document`, or with `check` only say whether it is current
    (exit status: 0 current or written, 1 stale or markers missing)."""
    text = document.read_text(encoding="utf-8")
    updated = splice(text, start, end, block)
    if updated is None:
        print(f"{document.name} lacks the {start!r} … {end!r} markers", file=sys.stderr)
        return 1
    if check:
        if updated != text:
            print(f"{document.name}'s generated block is out of date: run `make gen`")
            return 1
        return 0
    document.write_text(updated, encoding="utf-8")
    return 0
