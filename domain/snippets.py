"""Snippet extraction with the `@@ -start,count @@ (B before, A after)` header."""

from __future__ import annotations

from domain.model import Snippet
from domain.text import is_letter_or_number, js_split_ws, js_trim, utf16_len, utf16_prefix

# The window searched around a chunk when its length is unknown (the char chunk size).
DEFAULT_CHUNK_CHARS = 3600
# Characters of context read before and after a chunk window.
WINDOW_PADDING = 100
INTENT_WEIGHT_SNIPPET = 0.3
INTENT_WEIGHT_CHUNK = 0.5

# Function words and search-context noise that say nothing about what the caller wants.
INTENT_STOP_WORDS = frozenset(
    (
        "am",
        "an",
        "as",
        "at",
        "be",
        "by",
        "do",
        "he",
        "if",
        "in",
        "is",
        "it",
        "me",
        "my",
        "no",
        "of",
        "on",
        "or",
        "so",
        "to",
        "up",
        "us",
        "we",
        "all",
        "and",
        "any",
        "are",
        "but",
        "can",
        "did",
        "for",
        "get",
        "has",
        "her",
        "him",
        "his",
        "how",
        "its",
        "let",
        "may",
        "not",
        "our",
        "out",
        "the",
        "too",
        "was",
        "who",
        "why",
        "you",
        "also",
        "does",
        "find",
        "from",
        "have",
        "into",
        "more",
        "need",
        "show",
        "some",
        "tell",
        "that",
        "them",
        "this",
        "want",
        "what",
        "when",
        "will",
        "with",
        "your",
        "about",
        "looking",
        "notes",
        "search",
        "where",
        "which",
    )
)


def extract_intent_terms(intent: str) -> list[str]:
    """Lower-cased intent words, edge punctuation stripped, stop words and 1-char words out."""
    terms: list[str] = []
    for raw in js_split_ws(intent.lower()):
        start, end = 0, len(raw)
        while start < end and not is_letter_or_number(raw[start]):
            start += 1
        while end > start and not is_letter_or_number(raw[end - 1]):
            end -= 1
        term = raw[start:end]
        if utf16_len(term) > 1 and term not in INTENT_STOP_WORDS:
            terms.append(term)
    return terms


def extract_snippet(
    body: str,
    query: str,
    max_len: int = 300,
    chunk_pos: int | None = None,
    chunk_len: int | None = None,
    intent: str | None = None,
) -> Snippet:
    """Best-matching line plus one before and two after, truncated to `max_len`.

    Lines score +1 per query word (lower-cased, whitespace-split) they contain and +0.3 per
    intent term; the first best line wins. With `chunk_pos` only the chunk's window (±100
    characters) is searched; if nothing matches there, a chunk at 0 retries on the whole
    body and any other chunk anchors on its own first line. `Snippet.line` is the absolute
    1-based best line; the text is the header line, `\\n`, then the (truncated) lines.
    Lengths are UTF-16 code units like the original's; a cut never halves a character.
    """
    total_lines = body.count("\n") + 1
    windowed = chunk_pos is not None and chunk_pos >= 0
    search_body = body
    line_offset = 0
    window_start = 0
    if chunk_pos is not None and windowed:
        search_len = chunk_len or DEFAULT_CHUNK_CHARS
        window_start = max(0, chunk_pos - WINDOW_PADDING)
        window_end = min(len(body), chunk_pos + search_len + WINDOW_PADDING)
        search_body = body[window_start:window_end]
        if window_start > 0:
            line_offset = body.count("\n", 0, window_start)

    lines = search_body.split("\n")
    query_terms = [t for t in js_split_ws(query.lower()) if t]
    intent_terms = extract_intent_terms(intent) if intent else []
    best_line, best_score = 0, -1.0
    for index, line in enumerate(lines):
        lowered = line.lower()
        score = 0.0
        for term in query_terms:
            if term in lowered:
                score += 1.0
        for term in intent_terms:
            if term in lowered:
                score += INTENT_WEIGHT_SNIPPET
        if score > best_score:
            best_score, best_line = score, index

    if chunk_pos is not None and windowed and best_score <= 0:
        if chunk_pos == 0:
            # 0 is also the "no chunk won" default upstream, so look at the whole body.
            return extract_snippet(body, query, max_len, None, None, intent)
        # The chunk was picked semantically; show its start rather than line 1.
        best_line = search_body.count("\n", 0, chunk_pos - window_start)

    start = max(0, best_line - 1)
    end = min(len(lines), best_line + 3)
    snippet_lines = lines[start:end]
    text = "\n".join(snippet_lines)
    if chunk_pos and chunk_pos > 0 and not js_trim(text):
        return extract_snippet(body, query, max_len, None, None, intent)

    if utf16_len(text) > max_len:
        text = utf16_prefix(text, max_len - 3) + "..."

    absolute_start = line_offset + start + 1
    count = len(snippet_lines)
    before = absolute_start - 1
    after = total_lines - (absolute_start + count - 1)
    header = f"@@ -{absolute_start},{count} @@ ({before} before, {after} after)"
    return Snippet(line=line_offset + best_line + 1, text=f"{header}\n{text}")
