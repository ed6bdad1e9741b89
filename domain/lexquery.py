"""QMD's lex query syntax parsed into a storage-neutral form.

Syntax (REQ-SEARCH-LEX-001..007 in docs/spec/search.md): bare terms are prefix matches,
`"…"` is an exact phrase, a leading `-` negates a term or phrase, hyphenated words become
phrases, dotted tokens are split into ANDed parts, runs of CJK characters become phrases of
single characters.
Only letters, digits, `'` and `_` survive inside a term; everything is lower-cased.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Final

from domain.errors import INVALID_ARGUMENT, QmdError
from domain.lazy_regex import LazyRegex
from domain.text import is_js_space, is_letter_or_number, js_split_ws, js_trim


@dataclass(frozen=True)
class LexTerm:
    """Adjacent words that must occur in order; `prefix` marks a single-word prefix match."""

    words: tuple[str, ...]
    prefix: bool


@dataclass(frozen=True)
class LexClause:
    """Terms that must all match (one term for most tokens, several for dotted tokens)."""

    terms: tuple[LexTerm, ...]
    negated: bool = False


@dataclass(frozen=True)
class LexQuery:
    """A parsed keyword query: its clauses and whether any of them suffices."""

    clauses: tuple[LexClause, ...]
    # True: a document matching ANY positive clause qualifies (the spec surface's recall
    # fallback); the original's rule, and the default, is that all of them must match.
    match_any: bool = False

    @property
    def positives(self) -> tuple[LexClause, ...]:
        return tuple(c for c in self.clauses if not c.negated)

    @property
    def negatives(self) -> tuple[LexClause, ...]:
        return tuple(c for c in self.clauses if c.negated)

    @property
    def is_searchable(self) -> bool:
        """A query with no positive clause matches nothing (QMD returns no results)."""
        return bool(self.positives)


# Han, Hiragana, Katakana and Hangul by Unicode Script property (what the original's
# `\p{Script=...}` classes match; Python's `re` has no script classes).
_CJK_RANGES = (
    (0x1100, 0x11FF),
    (0x2E80, 0x2E99),
    (0x2E9B, 0x2EF3),
    (0x2F00, 0x2FD5),
    (0x3005, 0x3005),
    (0x3007, 0x3007),
    (0x3021, 0x3029),
    (0x302E, 0x302F),
    (0x3038, 0x303B),
    (0x3041, 0x3096),
    (0x309D, 0x309F),
    (0x30A1, 0x30FA),
    (0x30FD, 0x30FF),
    (0x3131, 0x318E),
    (0x31F0, 0x321E),
    (0x3260, 0x327E),
    (0x32D0, 0x32FE),
    (0x3300, 0x3357),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA960, 0xA97C),
    (0xAC00, 0xD7A3),
    (0xD7B0, 0xD7C6),
    (0xD7CB, 0xD7FB),
    (0xF900, 0xFA6D),
    (0xFA70, 0xFAD9),
    (0xFF66, 0xFF6F),
    (0xFF71, 0xFF9D),
    (0xFFA0, 0xFFBE),
    (0xFFC2, 0xFFC7),
    (0xFFCA, 0xFFCF),
    (0xFFD2, 0xFFD7),
    (0xFFDA, 0xFFDC),
    (0x16FE2, 0x16FE3),
    (0x16FF0, 0x16FF6),
    (0x1AFF0, 0x1AFF3),
    (0x1AFF5, 0x1AFFB),
    (0x1AFFD, 0x1AFFE),
    (0x1B000, 0x1B122),
    (0x1B132, 0x1B132),
    (0x1B150, 0x1B152),
    (0x1B155, 0x1B155),
    (0x1B164, 0x1B167),
    (0x1F200, 0x1F200),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B81D),
    (0x2B820, 0x2CEAD),
    (0x2CEB0, 0x2EBE0),
    (0x2EBF0, 0x2EE5D),
    (0x2F800, 0x2FA1D),
    (0x30000, 0x3134A),
    (0x31350, 0x33479),
)
_CJK_CLASS = "[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in _CJK_RANGES) + "]"
_CJK_CHAR = LazyRegex(_CJK_CLASS)
_CJK_RUN = LazyRegex(_CJK_CLASS + "+")


def space_cjk(text: str) -> str:
    """Rewrite every run of Han/Hiragana/Katakana/Hangul so each character is its own token.

    Each run becomes its characters joined by single spaces, padded with one space on each
    side (exactly the original's index-time normalisation): `"中文abc"` -> `" 中 文 abc"`.
    """
    if text.isascii():  # every CJK range lies above U+007F
        return text
    return _CJK_RUN.sub(lambda m: " " + " ".join(m.group(0)) + " ", text)


def contains_cjk(text: str) -> bool:
    return not text.isascii() and _CJK_CHAR.search(text) is not None


def sanitize_term(term: str) -> str:
    """Keep only letters, digits, `'` and `_`, lower-cased (so FTS5 syntax cannot leak in)."""
    return "".join(ch for ch in term if ch in "'_" or is_letter_or_number(ch)).lower()


def _is_word_run(part: str) -> bool:
    # `^[\p{L}\p{N}_]+$`
    return bool(part) and all(ch == "_" or is_letter_or_number(ch) for ch in part)


def _is_hyphenated(token: str) -> bool:
    # `^[LN][LN'-]*-[LN][LN'-]*$`: starts and (after some hyphen) continues with a letter/digit.
    if len(token) < 3 or not is_letter_or_number(token[0]):
        return False
    if any(not (ch in "'-" or is_letter_or_number(ch)) for ch in token):
        return False
    return any(
        token[i] == "-" and is_letter_or_number(token[i + 1]) for i in range(1, len(token) - 1)
    )


def _is_dotted(token: str) -> bool:
    parts = token.split(".")
    return len(parts) >= 2 and all(_is_word_run(p) for p in parts)


def _phrase_words(phrase: str) -> tuple[str, ...]:
    """Words of a quoted phrase (or CJK token): CJK spaced, dotted tokens split into parts."""
    words: list[str] = []
    for token in js_split_ws(space_cjk(phrase)):
        if _is_dotted(token):
            words.extend(w for w in (sanitize_term(p) for p in token.split(".")) if w)
        else:
            word = sanitize_term(token)
            if word:
                words.append(word)
    return tuple(words)


def _plain_token_clause(token: str, negated: bool) -> LexClause | None:
    terms: tuple[LexTerm, ...]
    if _is_hyphenated(token):
        words = tuple(w for w in (sanitize_term(p) for p in token.split("-")) if w)
        terms = (LexTerm(words, prefix=False),) if words else ()
    elif _is_dotted(token):
        parts = [w for w in (sanitize_term(p) for p in token.split(".")) if w]
        terms = tuple(LexTerm((p,), prefix=True) for p in parts)
    elif contains_cjk(token):
        words = _phrase_words(token)
        terms = (LexTerm(words, prefix=False),) if words else ()
    else:
        word = sanitize_term(token)
        terms = (LexTerm((word,), prefix=True),) if word else ()
    return LexClause(terms, negated) if terms else None


def parse_lex_query(text: str) -> LexQuery:
    """Parse raw user text; never raises on any input.

    Tokens are read left to right: an optional `-` negates what follows; `"..."` is a phrase
    (an unclosed quote runs to the end); anything else runs to the next whitespace or quote.
    Tokens that sanitise to nothing are dropped.

    How the SQLite adapter renders the result as an FTS5 MATCH string (positives joined with
    ` AND `, then ` NOT <clause>` per negative; a negated multi-term clause in parentheses):

    >>> q = parse_lex_query('"C++ performance" node.js multi-agent -sports -v1.2')
    >>> for c in q.clauses:
    ...     print(c.negated, [(t.words, t.prefix) for t in c.terms])
    False [(('c', 'performance'), False)]
    False [(('node',), True), (('js',), True)]
    False [(('multi', 'agent'), False)]
    True [(('sports',), True)]
    True [(('v1',), True), (('2',), True)]

    renders as `"c performance" AND "node"* AND "js"* AND "multi agent" NOT "sports"*
    NOT ("v1"* AND "2"*)`; `foo bar` as `"foo"* AND "bar"*`; `-a -b` is not searchable.
    """
    clauses: list[LexClause] = []
    s = js_trim(text)
    n = len(s)
    i = 0
    while i < n:
        while i < n and is_js_space(s[i]):
            i += 1
        if i >= n:
            break
        negated = s[i] == "-"
        if negated:
            i += 1
        clause: LexClause | None
        if i < n and s[i] == '"':
            close = s.find('"', i + 1)
            end = n if close < 0 else close
            phrase = js_trim(s[i + 1 : end])
            i = end + 1
            words = _phrase_words(phrase) if phrase else ()
            clause = LexClause((LexTerm(words, prefix=False),), negated) if words else None
        else:
            start = i
            while i < n and s[i] != '"' and not is_js_space(s[i]):
                i += 1
            clause = _plain_token_clause(s[start:i], negated)
        if clause is not None:
            clauses.append(clause)
    return LexQuery(tuple(clauses))


# A search text's bounds (REQ-BOUND-*, issue 11), checked on the one parse the search then
# uses: FTS5 time grows with the square of the number of terms (`a b` x 3,000 took 42 s).
# The limits sit far above what a person or an agent types.
MAX_QUERY_CHARS: Final = 4000
MAX_QUERY_TERMS: Final = 128


def check_query(text: str, label: str = "query") -> LexQuery:
    """A search text: at most MAX_QUERY_CHARS characters and MAX_QUERY_TERMS terms, else
    `invalid-argument` naming the bound. Returns the text parsed, for the search to use
    rather than parse it again."""
    if len(text) > MAX_QUERY_CHARS:
        raise QmdError(
            INVALID_ARGUMENT,
            f"{label} is too long: {len(text)} characters (at most {MAX_QUERY_CHARS})",
        )
    parsed = parse_lex_query(text)
    terms = sum(len(clause.terms) for clause in parsed.clauses)
    if terms > MAX_QUERY_TERMS:
        raise QmdError(
            INVALID_ARGUMENT,
            f"{label} has too many terms: {terms} (at most {MAX_QUERY_TERMS})",
        )
    return parsed


# At most this many character pairs in the CJK fallback: a pasted paragraph must not become a
# query of hundreds of phrases.
MAX_CJK_BIGRAMS = 32


def _is_cjk_char(word: str) -> bool:
    return len(word) == 1 and contains_cjk(word)


def _split_cjk_term(term: LexTerm) -> list[LexTerm] | None:
    """The term with each run of CJK characters cut into its overlapping character pairs (a
    lone character stays itself) and its other words kept as exact words; None when cutting
    changes nothing (no CJK run longer than two characters, nothing besides it)."""
    runs: list[list[str]] = [[]]
    others: list[str] = []
    for word in term.words:
        if _is_cjk_char(word):
            runs[-1].append(word)
        else:
            others.append(word)
            runs.append([])
    runs = [run for run in runs if run]
    if not runs or (len(runs) == 1 and len(runs[0]) <= 2 and not others):
        return None
    parts: list[LexTerm] = []
    for run in runs:
        if len(run) == 1:
            parts.append(LexTerm((run[0],), prefix=False))
        parts.extend(LexTerm((a, b), prefix=False) for a, b in pairwise(run))
    # a lone letter or digit beside the run ("B站") would match nearly every document
    parts.extend(LexTerm((word,), prefix=False) for word in others if len(word) > 1)
    return parts


def cjk_fallback_query(query: LexQuery) -> LexQuery | None:
    """A query that finds the words inside unsegmented CJK text when a CJK run of the query is
    not found as a whole (REQ-SPEC-SEARCH-007): every positive clause holding a CJK run of three
    characters or more becomes one clause per character pair of the run (its other words kept), the
    other clauses and the negations stay, and any clause suffices. None when the query has no
    such run, so the fallback is never asked for."""
    clauses: list[LexClause] = []
    seen: set[LexTerm] = set()
    changed = False
    for clause in query.clauses:
        split = None
        if not clause.negated:
            pieces = [_split_cjk_term(term) for term in clause.terms]
            if any(p is not None for p in pieces):
                split = [
                    part
                    for piece, term in zip(pieces, clause.terms, strict=True)
                    for part in (piece if piece is not None else [term])
                ]
        if split is None:
            clauses.append(clause)
            continue
        changed = True
        for term in split:
            if term not in seen and len(seen) < MAX_CJK_BIGRAMS:
                seen.add(term)
                clauses.append(LexClause((term,)))
    if not changed:
        return None
    return replace(query, clauses=tuple(clauses), match_any=True)
