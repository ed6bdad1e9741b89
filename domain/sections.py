"""Heading-aware sections: the chunk rows `qmd update` stores for every document
(docs/spec/projmem.md, REQ-PROJMEM-CHUNK-*).

A document's lines are cut at ATX headings (`#` to `######` followed by a space, outside
fenced code); a section longer than `MAX_SECTION_CHARS` is cut again at line boundaries.
The sections cover every line exactly once, in order, without overlap, so a section's text is
`"\\n".join(lines[start_line - 1 : end_line])`. Independent of any embedding model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_SECTION_CHARS = 3600  # the original's chunk size in characters (900 tokens x 4)
HEADING_SEPARATOR = " > "

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Section:
    """One chunk of a document: 1-based inclusive line range and the heading path above it."""

    seq: int
    heading_path: str
    start_line: int
    end_line: int
    text: str


def document_lines(body: str) -> list[str]:
    """The lines a section numbers: split on `\\n`, a final newline ends the last line."""
    if not body:
        return []
    lines = body.split("\n")
    if body.endswith("\n"):
        lines.pop()
    return lines


def _heading(line: str) -> tuple[int, str] | None:
    if not line.lstrip(" ").startswith("#"):
        return None
    match = _HEADING.match(line)
    if match is None:
        return None
    title = (match.group(2) or "").strip()
    return len(match.group(1)), title


def split_sections(body: str, max_chars: int = MAX_SECTION_CHARS) -> list[Section]:
    """Cut `body` into sections; an empty body has none."""
    lines = document_lines(body)
    # (start index, heading path) of every heading-delimited block
    blocks: list[tuple[int, str]] = [(0, "")]
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    for index, line in enumerate(lines):
        fence_match = _FENCE.match(line)
        if fence_match is not None:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        found = _heading(line)
        if found is None:
            continue
        level, title = found
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        path = HEADING_SEPARATOR.join(t for _, t in stack if t)
        if index == 0:
            blocks[0] = (0, path)
        else:
            blocks.append((index, path))
    sections: list[Section] = []
    for number, (start, path) in enumerate(blocks):
        end = blocks[number + 1][0] if number + 1 < len(blocks) else len(lines)
        if start >= end:
            continue
        for piece_start, piece_end in _pieces(lines, start, end, max_chars):
            sections.append(
                Section(
                    seq=len(sections),
                    heading_path=path,
                    start_line=piece_start + 1,
                    end_line=piece_end,
                    text="\n".join(lines[piece_start:piece_end]),
                )
            )
    return sections


def _pieces(lines: list[str], start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """[start, end) cut into runs of whole lines of at most `max_chars` (a longer line alone)."""
    pieces: list[tuple[int, int]] = []
    piece_start = start
    size = 0
    for index in range(start, end):
        length = len(lines[index]) + 1
        if index > piece_start and size + length > max_chars:
            pieces.append((piece_start, index))
            piece_start, size = index, 0
        size += length
    pieces.append((piece_start, end))
    return pieces


def line_of_offset(body: str, offset: int) -> int:
    """The 1-based line holding character `offset` of `body`."""
    return body.count("\n", 0, max(0, min(offset, len(body)))) + 1
