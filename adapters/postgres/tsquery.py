"""QMD's lex syntax on PostgreSQL full-text search.

Both sides of a match go through `fold`: CJK runs spaced into single characters (as on
SQLite), then every run of characters that is not a letter or digit becomes one space, which is
how FTS5's `unicode61` tokenizer splits text. PostgreSQL's own parser would otherwise keep
`notes/api.md`, `2.8.3` or `rate-limit` as single tokens (file, version and hyphenated-word
types) where SQLite sees separate words; after folding it only ever sees plain words and
numbers, so a query matches the same words on both backends.

A parsed `LexQuery` becomes a `to_tsquery` string over quoted lexemes:

* a prefix term -> `'word':*`; a phrase (or a word that folds into several) -> `'a' <-> 'b'`;
* a clause of several terms (a dotted token) -> its parts joined with `&`;
* positive clauses joined with `&` (`|` for `match_any`), each negative clause appended as
  `& !(...)`; no positive clause -> None (nothing to search).

Folded words hold only letters, digits and spaces, so the quoting can never be broken by the
user's text.
"""

from __future__ import annotations

import re

from domain.lexquery import LexClause, LexQuery, LexTerm, space_cjk

# The text search configuration both documents and queries use: Snowball's `porter` stemmer
# (Porter's original algorithm, FTS5's; English Snowball until migration 13) with NO stop
# words. FTS5's `porter unicode61` drops no word either, so `"hello to the"` must stay a
# three-word phrase. Here, not in schema.py, so that fts.py reads it without importing the
# migrations that import fts.py.
TS_CONFIG = "qmd_text"

_SEPARATORS = re.compile(r"[\W_]+")

# tsvector caps: 1 MiB per value, positions up to 16383. A longer body is indexed up to this
# many characters (phrases past position 16383 cannot match: PostgreSQL clamps positions).
MAX_INDEXED_CHARS = 400_000


def fold(text: str) -> str:
    return _SEPARATORS.sub(" ", space_cjk(text)).strip()


def _tokens(word: str) -> list[str]:
    return [token for token in fold(word).lower().split(" ") if token]


def render_term(term: LexTerm) -> str | None:
    tokens = [token for word in term.words for token in _tokens(word)]
    if not tokens:
        return None
    if term.prefix and len(tokens) == 1:
        return f"'{tokens[0]}':*"
    if len(tokens) == 1:
        return f"'{tokens[0]}'"
    return "(" + " <-> ".join(f"'{token}'" for token in tokens) + ")"


def _clause(clause: LexClause) -> str | None:
    parts = [part for part in (render_term(t) for t in clause.terms) if part is not None]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else "(" + " & ".join(parts) + ")"


def positive_clauses(query: LexQuery) -> list[str]:
    """Each positive term on its own, as the ranking weighs them: FTS5's bm25 gives every
    phrase of a query its own idf and hit count, a dotted token's parts included (`2.8.3` is
    three), so the parts of a clause are scored apart while the clause still matches whole."""
    return [
        rendered
        for clause in query.clauses
        if not clause.negated
        for term in clause.terms
        if (rendered := render_term(term)) is not None
    ]


def has_grouped_clause(query: LexQuery) -> bool:
    """Whether a positive clause has several terms (scored apart by `positive_clauses`): an
    any-term query then matches fewer rows than the union of the scored terms."""
    return any(not clause.negated and len(clause.terms) > 1 for clause in query.clauses)


def render_tsquery(query: LexQuery) -> str | None:
    positives: list[str] = []
    negatives: list[str] = []
    for clause in query.clauses:
        rendered = _clause(clause)
        if rendered is None:
            continue
        (negatives if clause.negated else positives).append(rendered)
    if not positives:
        return None
    joiner = " | " if query.match_any else " & "
    result = joiner.join(positives)
    if len(positives) > 1:
        result = f"({result})"
    for negative in negatives:
        result = f"{result} & !{negative}"
    return result
