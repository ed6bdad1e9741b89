"""Text as the original reads and shows it: JavaScript's whitespace, lengths and rounding,
titles, line numbering, snippets, contexts and content hashes.

QMD is written in TypeScript, so wherever it splits on `/\\s+/`, calls `trim()`, compares
`.length` or calls `Math.round`, it uses JavaScript's definitions. Python's `str.split()`/
`strip()` differ at the edges (`\\x1c`-`\\x1f` are whitespace to Python, U+FEFF is whitespace
to JavaScript), `len()` counts code points where JavaScript counts UTF-16 code units, and
`round()` rounds halves to even: the `js_*` and `utf16_*` functions below give JavaScript's
answers, for byte-identical output. What a search shows of a hit is made of them: its snippet
(`extract_snippet`), its score as a figure (`round_score`, `percent`), its line numbers and its
context.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from domain.lazy_regex import LazyRegex
from domain.model import Snippet

# ECMAScript WhiteSpace + LineTerminator, the set `\s` and `trim()` use.
JS_WS_CHARS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
JS_WS_CLASS = "[" + re.escape(JS_WS_CHARS) + "]"
_JS_WS_RUN = re.compile(JS_WS_CLASS + "+")

# Line terminators for `.` and `^`/`$` (multiline) in JavaScript regexes.
JS_LINE_TERMINATORS = "\n\r\u2028\u2029"


def is_js_space(ch: str) -> bool:
    return ch in JS_WS_CHARS


def js_trim(text: str) -> str:
    return text.strip(JS_WS_CHARS)


def js_split_ws(text: str) -> list[str]:
    """`text.split(/\\s+/)`: keeps the empty strings a leading/trailing run produces."""
    return _JS_WS_RUN.split(text)


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def utf16_len(text: str) -> int:
    """`String.prototype.length`: astral characters count twice."""
    if text.isascii():  # the common case, answered without a per-character loop
        return len(text)
    return len(text) + len(_ASTRAL.findall(text))


def utf16_prefix(text: str, units: int) -> str:
    """`text.substring(0, units)` without ever ending on half a surrogate pair.

    Where JavaScript would cut an astral character in two (leaving a lone surrogate that
    cannot be encoded as UTF-8), the whole character is dropped instead.
    """
    if units <= 0:
        return ""
    if _ASTRAL.search(text) is None:  # every character is one unit: a plain slice
        return text[:units]
    used = 0
    for index, ch in enumerate(text):
        width = 2 if ord(ch) > 0xFFFF else 1
        if used + width > units:
            return text[:index]
        used += width
    return text


def is_letter_or_number(ch: str) -> bool:
    """`/[\\p{L}\\p{N}]/u` for one code point."""
    return unicodedata.category(ch)[0] in "LN"


def js_round(value: float) -> int:
    """JavaScript `Math.round`: halves round towards +infinity (-2.5 -> -2, 2.5 -> 3).

    Computed from the exact fractional part rather than `floor(x + 0.5)`, because the
    addition itself can round (0.49999999999999994 + 0.5 == 1.0, yet JS gives 0).
    Non-finite input has no integer value and raises ValueError.
    """
    if not math.isfinite(value):
        raise ValueError(f"cannot round {value!r} to an integer")
    floor = math.floor(value)
    # value - floor is exact for doubles, so this comparison is too.
    return floor + 1 if value - floor >= 0.5 else floor


def round_score(score: float) -> float:
    """`Math.round(score * 100) / 100` exactly as JavaScript computes it.

    The product is taken in binary floating point as in JS, so the result follows the
    stored value, not the decimal literal: 0.845 * 100 is exactly 84.5 -> 0.85, while
    1.005 * 100 is 100.49999999999999 -> 1 (node prints the same).
    NaN and infinities pass through unchanged, as they do in JS.
    """
    if not math.isfinite(score):
        return score
    return js_round(score * 100) / 100


def percent(score: float) -> int:
    """`Math.round(score * 100)`, the figure shown as `85%`."""
    return js_round(score * 100)


# The original matches `/^##?\s+(.+)$/m` in JavaScript: `^`/`$` see all four line
# terminators, `.` stops at them, and `\s+` may run across blank lines.
_LT = JS_LINE_TERMINATORS
_LINE_START = f"(?:(?<=[{_LT}])|\\A)"
_LINE_END = f"(?=[{_LT}]|\\Z)"
_MD_HEADING = LazyRegex(f"{_LINE_START}##?{JS_WS_CLASS}+([^{_LT}]+){_LINE_END}")
_MD_H2 = LazyRegex(f"{_LINE_START}##{JS_WS_CLASS}+([^{_LT}]+){_LINE_END}")
_ORG_TITLE = LazyRegex(
    f"{_LINE_START}#\\+TITLE:{JS_WS_CLASS}*([^{_LT}]+){_LINE_END}", re.IGNORECASE
)
_ORG_HEADING = LazyRegex(f"{_LINE_START}\\*+{JS_WS_CLASS}+([^{_LT}]+){_LINE_END}")
_EXTENSION = LazyRegex(r"\.[^.]+\Z")
_NOTES_TITLES = ("📝 Notes", "Notes")


def content_hash(body: str) -> str:
    """sha256 hex of the UTF-8 body (the original's content address)."""
    import hashlib  # indexing only: OpenSSL's load costs every cold start otherwise

    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def extract_title(body: str, filename: str) -> str:
    """First `#`/`##` heading for .md files ("Notes" defers to the next `##`); else the stem.

    Setext headings and frontmatter `title:` are ignored. `.org` files use `#+TITLE:`, then
    the first `*` heading. Any other extension (`.markdown` included), or no match, gives
    the file name without its last extension (`notes/no heading.md` -> `no heading`).
    """
    dot = filename.rfind(".")
    # JS `slice(lastIndexOf('.'))` with -1 gives the last character; never an extractor key.
    extension = filename[dot:].lower() if dot >= 0 else filename[-1:]
    title: str | None = None
    if extension == ".md":
        title = _markdown_title(body)
    elif extension == ".org":
        title = _org_title(body)
    if title:
        return title
    return _EXTENSION.sub("", filename).split("/")[-1] or filename


def _markdown_title(body: str) -> str | None:
    match = _MD_HEADING.search(body)
    if match is None:
        return None
    title = js_trim(match.group(1))
    if title in _NOTES_TITLES:
        # A generic "Notes" heading says nothing; the first H2 (maybe itself) does.
        h2 = _MD_H2.search(body)
        if h2 is not None and h2.group(1):
            return js_trim(h2.group(1))
    return title


def _org_title(body: str) -> str | None:
    for pattern in (_ORG_TITLE, _ORG_HEADING):
        match = pattern.search(body)
        if match is not None and match.group(1):
            return js_trim(match.group(1))
    return None


def add_line_numbers(text: str, start: int = 1) -> str:
    """Prefix every line with `N: ` starting at `start` (lines split on `\\n` only)."""
    return "\n".join(f"{start + i}: {line}" for i, line in enumerate(text.split("\n")))


def resolve_context(
    global_context: str | None, contexts: Mapping[str, str], path: str
) -> str | None:
    """Global context first, then every matching prefix, shortest first, joined by a blank line.

    `path` is collection-relative; a prefix matches when "/" + path starts with "/" + prefix
    (plain string prefix, so `work` also matches `workshop.md`); "" and "/" match everything.
    An empty global context counts as none. Equal-length prefixes keep mapping order.
    """
    found: list[str] = [global_context] if global_context else []
    rooted_path = path if path.startswith("/") else "/" + path
    matching: list[tuple[int, str]] = []
    for prefix, description in contexts.items():
        rooted_prefix = prefix if prefix.startswith("/") else "/" + prefix
        if rooted_path.startswith(rooted_prefix):
            matching.append((len(rooted_prefix), description))
    matching.sort(key=lambda item: item[0])  # stable: ties keep mapping order
    found.extend(description for _, description in matching)
    return "\n\n".join(found) if found else None


def slice_lines(body: str, from_line: int | None, max_lines: int | None) -> str:
    """Lines [from-1, from-1+max) of the body; `from_line` is clamped to >= 1.

    With neither bound the body comes back unchanged. A start past the end gives "" (which
    `add_line_numbers` turns into `500: `). A negative `max_lines` slices from the end, as
    JavaScript's `Array.slice` does.
    """
    if from_line is None and max_lines is None:
        return body
    lines = body.split("\n")
    start = max(0, (from_line or 1) - 1)
    end = start + max_lines if max_lines is not None else len(lines)
    return "\n".join(lines[start:end])


@dataclass(frozen=True)
class LineWindow:
    """What fits of a requested line window in a character budget (issue 11: bounded replies).

    `first`/`last` are the 1-based numbers of the lines shown (`last` < `first` when none is);
    `cut_line` says the one line shown was itself longer than the budget and is cut.
    """

    text: str
    first: int
    last: int
    total: int
    truncated: bool
    cut_line: bool = False


def window_lines(
    body: str,
    from_line: int | None,
    max_lines: int | None,
    max_chars: int,
    numbered_from: int | None = None,
) -> LineWindow:
    """`slice_lines`' window, then cut at a line boundary so the text is at most `max_chars`
    (counting the `N: ` prefixes `add_line_numbers(text, numbered_from)` will add)."""
    if from_line is None and max_lines is None and numbered_from is None and len(body) <= max_chars:
        return LineWindow(body, 1, body.count("\n") + 1, body.count("\n") + 1, False)
    lines = body.split("\n")
    start = max(0, (from_line or 1) - 1)
    end = start + max_lines if max_lines is not None else len(lines)
    chosen = range(len(lines))[start:end]
    first = (chosen.start if chosen else start) + 1
    kept: list[str] = []
    used = 0
    for index in chosen:
        line = lines[index]
        cost = len(line) + (1 if kept else 0)
        if numbered_from is not None:
            cost += len(str(numbered_from + len(kept))) + 2
        if used + cost > max_chars:
            if not kept:  # a single line longer than the whole budget: show its start
                return LineWindow(line[:max_chars], first, first, len(lines), True, True)
            break
        used += cost
        kept.append(line)
    return LineWindow(
        "\n".join(kept), first, first + len(kept) - 1, len(lines), len(kept) < len(chosen)
    )


# -- snippets: the `@@ -start,count @@ (B before, A after)` header and the best lines

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
