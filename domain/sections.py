"""Heading-aware sections: the chunk rows `qmd update` stores for every document
(docs/spec/projmem.md, REQ-PROJMEM-CHUNK-*).

A document's lines are cut at ATX headings (`#` to `######` followed by a space, outside
fenced code); a section longer than `MAX_SECTION_CHARS` is cut again at line boundaries.
The sections cover every line exactly once, in order, without overlap, so a section's text is
`"\\n".join(lines[start_line - 1 : end_line])`. Independent of any embedding model.
"""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_SECTION_CHARS = 3600  # the original's chunk size in characters (900 tokens x 4)
HEADING_SEPARATOR = " > "

# A fence line, or a whole ATX heading line (its title without the closing #s), in one scan.
_MARKS = re.compile(
    r"^ {0,3}(?:(?P<fence>`{3,}|~{3,})|(?P<hashes>#{1,6})(?:[ \t]+(?P<title>.*?))?[ \t]*#*[ \t]*$)",
    re.M,
)
# Where such a line may start: a literal-led pattern, which the regex engine scans for fast.
_MARK_START = re.compile(r"\n {0,3}[#`~]")


def _mark_starts(body: str, end: int) -> list[int]:
    starts = [0] if _MARKS.match(body, 0, end) else []
    starts += [m.start() + 1 for m in _MARK_START.finditer(body, 0, end)]
    return starts


class Section(NamedTuple):
    """One chunk of a document: 1-based inclusive line range and the heading path above it
    (a named tuple: `qmd update` makes one per section of every document)."""

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


def split_sections(body: str, max_chars: int = MAX_SECTION_CHARS) -> list[Section]:
    """Cut `body` into sections; an empty body has none.

    Only lines that may open a heading or a fence are looked at one by one (found with one
    regular-expression scan); everything else is sliced, so a document costs little more than
    a pass over its text (`qmd update` cuts every document).
    """
    if not body:
        return []
    end = len(body) - 1 if body.endswith("\n") else len(body)  # the final newline ends a line
    total_lines = body.count("\n", 0, end) + 1
    # (start offset, start line index, heading path) of every heading-delimited block
    blocks: list[tuple[int, int, str]] = [(0, 0, "")]
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    line_index, counted_to = 0, 0
    for start in _mark_starts(body, end):
        mark = _MARKS.match(body, start, end)
        if mark is None:
            continue
        line_index += body.count("\n", counted_to, start)
        counted_to = start
        marker = mark.group("fence")
        if marker is not None:
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        level, title = len(mark.group("hashes")), (mark.group("title") or "").strip()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        path = HEADING_SEPARATOR.join(t for _, t in stack if t)
        if line_index == 0:
            blocks[0] = (0, 0, path)
        else:
            blocks.append((start, line_index, path))
    sections: list[Section] = []
    for number, (start, first_line, path) in enumerate(blocks):
        if number + 1 < len(blocks):
            stop, next_line = blocks[number + 1][0] - 1, blocks[number + 1][1]
        else:
            stop, next_line = end, total_lines
        text = body[start:stop]
        if len(text) + 1 <= max_chars or next_line - first_line == 1:
            sections.append(Section(len(sections), path, first_line + 1, next_line, text))
            continue
        lines = text.split("\n")
        for piece_start, piece_end in _pieces(lines, 0, len(lines), max_chars):
            sections.append(
                Section(
                    seq=len(sections),
                    heading_path=path,
                    start_line=first_line + piece_start + 1,
                    end_line=first_line + piece_end,
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
