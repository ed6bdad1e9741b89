"""The original's markdown chunker: scored break points, fence-aware cut-offs, overlap.

Positions are Python string indices (code points). The original counts UTF-16 code units
and takes care never to cut a surrogate pair; indexing by code point cannot cut a
character at all, so chunk positions differ from the original's only after astral
characters (emoji), and `chunk.text == body[chunk.pos : chunk.pos + len(chunk.text)]`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domain.lazy_regex import LazyRegex
from domain.text import (
    INTENT_WEIGHT_CHUNK,
    JS_WS_CLASS,
    extract_intent_terms,
    js_split_ws,
    utf16_len,
)

CHUNK_SIZE_TOKENS = 900
CHUNK_OVERLAP_TOKENS = 135  # 15 %
CHUNK_WINDOW_TOKENS = 200
CHUNK_SIZE_CHARS = 3600  # 4 chars per token when no tokenizer is involved
CHUNK_OVERLAP_CHARS = 540
CHUNK_WINDOW_CHARS = 800
DECAY_FACTOR = 0.7
# The first, tokenizer-free pass of `chunk_by_tokens` assumes 3 characters per token.
CHARS_PER_TOKEN_ESTIMATE = 3
MIN_FITTED_CHUNK_TOKENS = 32  # below this a model's input is too small to chunk for

# Positions are those of the `\n` that starts each construct; the best score wins. Compiled
# when a document is first chunked: `qmd status` imports this module for the chunk sizes only.
_BREAK_PATTERNS: tuple[tuple[LazyRegex, int], ...] = (
    (LazyRegex(r"\n#(?!#)"), 100),
    (LazyRegex(r"\n##(?!#)"), 90),
    (LazyRegex(r"\n###(?!#)"), 80),
    (LazyRegex(r"\n####(?!#)"), 70),
    (LazyRegex(r"\n#####(?!#)"), 60),
    (LazyRegex(r"\n######(?!#)"), 50),
    (LazyRegex(r"\n```"), 80),
    (LazyRegex(rf"\n(?:---|\*\*\*|___){JS_WS_CLASS}*\n"), 60),
    (LazyRegex(r"\n\n+"), 20),
    (LazyRegex(rf"\n[-*]{JS_WS_CLASS}"), 5),
    (LazyRegex(rf"\n[0-9]+\.{JS_WS_CLASS}"), 5),
    (LazyRegex(r"\n"), 1),
)
_FENCE = LazyRegex(r"\n```")


@dataclass(frozen=True)
class Chunk:
    """A slice of a document, by character position."""

    text: str
    pos: int  # index of the chunk's first character in the document


@dataclass(frozen=True)
class TokenChunk:
    """A chunk cut to a token budget, with its token count."""

    text: str
    pos: int
    tokens: int


@dataclass(frozen=True)
class BreakPoint:
    """A position a chunk may end at, and how good a cut it is."""

    pos: int
    score: int


@dataclass(frozen=True)
class CodeFence:
    """A fenced code block, which no cut may split."""

    start: int  # the `\n` before the opening ```
    end: int  # just after the closing ``` (or the end of an unclosed fence's document)


def scan_break_points(text: str) -> list[BreakPoint]:
    """Every candidate cut position with its best score, sorted by position."""
    best: dict[int, int] = {}
    for pattern, score in _BREAK_PATTERNS:
        for match in pattern.finditer(text):
            pos = match.start()
            if score > best.get(pos, -1):
                best[pos] = score
    return [BreakPoint(pos, score) for pos, score in sorted(best.items())]


def find_code_fences(text: str) -> list[CodeFence]:
    """Regions between successive "\\n```" markers; an unclosed fence runs to the end."""
    fences: list[CodeFence] = []
    opening: int | None = None
    for match in _FENCE.finditer(text):
        if opening is None:
            opening = match.start()
        else:
            fences.append(CodeFence(opening, match.end()))
            opening = None
    if opening is not None:
        fences.append(CodeFence(opening, len(text)))
    return fences


def _inside_fence(pos: int, fences: Sequence[CodeFence]) -> bool:
    return any(fence.start < pos < fence.end for fence in fences)


def find_best_cutoff(
    break_points: Sequence[BreakPoint],
    target: int,
    window: int = CHUNK_WINDOW_CHARS,
    decay: float = DECAY_FACTOR,
    fences: Sequence[CodeFence] = (),
) -> int:
    """Best break point in [target - window, target], or `target` itself if none.

    Each point scores `base * (1 - (distance / window)^2 * decay)`: squared distance decays
    gently at first, so a heading well back still beats a bare newline near the target.
    The first of equal scores wins. Points inside code fences are never chosen.
    """
    window_start = target - window
    best_score = -1.0
    best_pos = target
    for point in break_points:
        if point.pos < window_start:
            continue
        if point.pos > target:
            break
        if window == 0 or _inside_fence(point.pos, fences):
            # With no window the score would be 0/0 (NaN in JS), which never wins.
            continue
        normalized = (target - point.pos) / window
        score = point.score * (1.0 - (normalized * normalized) * decay)
        if score > best_score:
            best_score = score
            best_pos = point.pos
    return best_pos


def chunk_document(
    text: str,
    max_chars: int = CHUNK_SIZE_CHARS,
    overlap_chars: int = CHUNK_OVERLAP_CHARS,
    window_chars: int = CHUNK_WINDOW_CHARS,
) -> list[Chunk]:
    """Split `text` into overlapping chunks cut at the best nearby break point.

    A text of at most `max_chars` is one chunk at 0 (an empty text too). Otherwise each
    chunk ends at `find_best_cutoff` of its hard limit, and the next starts `overlap_chars`
    before that end unless that would not move past the previous start.
    """
    if len(text) <= max_chars:
        return [Chunk(text, 0)]
    break_points = scan_break_points(text)
    fences = find_code_fences(text)
    chunks: list[Chunk] = []
    pos = 0
    while pos < len(text):
        target = min(pos + max_chars, len(text))
        end = target
        if end < len(text):
            cutoff = find_best_cutoff(break_points, target, window_chars, DECAY_FACTOR, fences)
            if pos < cutoff <= target:
                end = cutoff
        if end <= pos:
            end = min(pos + max_chars, len(text))
        chunks.append(Chunk(text[pos:end], pos))
        if end >= len(text):
            break
        next_pos = end - overlap_chars
        pos = end if next_pos <= pos else next_pos
    return chunks


def fitted_token_budget(input_limit: int | None, reserved_tokens: int = 0) -> tuple[int, int, int]:
    """(chunk, overlap, window) token sizes that fit an embedding model reading at most
    `input_limit` tokens per text, of which `reserved_tokens` go to its formatting (title,
    prompt): the defaults (900/135/200) when they fit, else shrunk in the same proportions, so
    nothing past the model's input is cut off silently (a 512-token MiniLM gets ~500)."""
    if input_limit is None:
        return CHUNK_SIZE_TOKENS, CHUNK_OVERLAP_TOKENS, CHUNK_WINDOW_TOKENS
    size = max(MIN_FITTED_CHUNK_TOKENS, min(CHUNK_SIZE_TOKENS, input_limit - reserved_tokens))
    if size == CHUNK_SIZE_TOKENS:
        return CHUNK_SIZE_TOKENS, CHUNK_OVERLAP_TOKENS, CHUNK_WINDOW_TOKENS
    overlap = size * CHUNK_OVERLAP_TOKENS // CHUNK_SIZE_TOKENS
    window = size * CHUNK_WINDOW_TOKENS // CHUNK_SIZE_TOKENS
    return size, overlap, window


def chunk_by_tokens(
    text: str,
    count_tokens: Callable[[str], int],
    max_tokens: int = CHUNK_SIZE_TOKENS,
    overlap_tokens: int = CHUNK_OVERLAP_TOKENS,
    window_tokens: int = CHUNK_WINDOW_TOKENS,
) -> list[TokenChunk]:
    """Chunks of at most `max_tokens` by the embedder's own tokenizer.

    First chunks in characters at 3 per token, then counts each chunk; one that is still
    too long is re-chunked with a budget from its real characters-per-token ratio (x 0.95,
    half the overlap and window), halving as a last resort, until every piece fits or is a
    single character. Unlike the original, an unsplittable chunk is never truncated, so the
    chunks always cover the whole text.
    """
    ratio = CHARS_PER_TOKEN_ESTIMATE
    overlap_chars = overlap_tokens * ratio
    window_chars = window_tokens * ratio
    results: list[TokenChunk] = []

    def place(piece: str, pos: int) -> None:
        tokens = count_tokens(piece)
        if tokens <= max_tokens or len(piece) <= 1:
            results.append(TokenChunk(piece, pos, tokens))
            return
        chars_per_token = len(piece) / tokens
        budget = math.floor(max_tokens * chars_per_token * 0.95)
        budget = max(1, min(len(piece) - 1, budget if budget >= 1 else len(piece) // 2))
        overlap = _clamp_overlap(overlap_chars * chars_per_token / 2, budget)
        window = max(0, math.floor(window_chars * chars_per_token / 2))
        pieces = chunk_document(piece, budget, overlap, window)
        if len(pieces) <= 1:
            pieces = chunk_document(piece, max(1, len(piece) // 2), 0, 0)
        for sub in pieces:
            place(sub.text, pos + sub.pos)

    for chunk in chunk_document(text, max_tokens * ratio, overlap_chars, window_chars):
        place(chunk.text, chunk.pos)
    return results


def _clamp_overlap(value: float, max_chars: int) -> int:
    if max_chars <= 1:
        return 0
    return max(0, min(max_chars - 1, math.floor(value)))


def best_chunk_index(chunks: Sequence[Chunk], query: str, intent: str | None = None) -> int:
    """Index of the chunk sharing most query words (lower-cased, longer than 2 characters).

    A chunk scores 1 per such word it contains and 0.5 per intent term; ties go to the
    first chunk, and 0 is returned when nothing matches or there are no chunks.
    """
    terms = [t for t in js_split_ws(query.lower()) if utf16_len(t) > 2]
    intent_terms = extract_intent_terms(intent) if intent else []
    best_index, best_score = 0, -1.0
    for index, chunk in enumerate(chunks):
        lowered = chunk.text.lower()
        score = float(sum(1 for term in terms if term in lowered))
        for term in intent_terms:
            if term in lowered:
                score += INTENT_WEIGHT_CHUNK
        if score > best_score:
            best_index, best_score = index, score
    return best_index
