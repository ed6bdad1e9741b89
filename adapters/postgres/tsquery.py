"""QMD's lex syntax on PostgreSQL full-text search.

Both sides of a match go through `fold`: CJK runs spaced into single characters (as on
SQLite), then every run of characters that is not a letter or digit becomes one space, which is
how FTS5's `unicode61` tokenizer splits text. PostgreSQL's own parser would otherwise keep
`notes/api.md`, `2.8.3` or `rate-limit` as single tokens (file, version and hyphenated-word
types) where SQLite sees separate words; after folding it only ever sees plain words and
numbers, so a query matches the same words on both backends. Folding also hands Snowball's
`porter` (Porter's 1980 algorithm) words it then stems to FTS5's stems: FTS5's `porter` leaves
a token under three characters as it is, where Snowball's stems `ls` to `l` and `is` to `i`
(such a token is written `lsqmdshort`, or `using` for `us`, in documents and queries alike),
and it follows Porter's later `logi` -> `log`, `bli` -> `ble` (`technology` is written
`technolog`). A prefix of a short word (`is*`: `is`, `island`) must not be stemmed either, and
`to_tsquery` stems every lexeme: it is rendered `'isqmdprefix':*`, which the stemmer leaves
alone, and `tsquery_sql` takes the mark off the parsed query.

A parsed `LexQuery` becomes a `to_tsquery` string over quoted lexemes:

* a prefix term -> `'word':*`; a phrase (or a word that folds into several) -> `'a' <-> 'b'`,
  its last word a prefix where the term is one (`file's*` -> `'file' <-> 's':*`);
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


# The two-character tokens Snowball's `porter` changes (checked over every pair of ASCII
# letters and digits): a final `s` is dropped (not from `ss`), a final `y` after a vowel
# becomes `i`. FTS5's porter stems no token under three characters. A vowel and `s` is a stem
# longer words share in FTS5 (`using` is `us`), so it is written as such a word (`us` as
# `using`, which the stemmer makes `us` again); the others as themselves and a mark.
_VOWEL_S = re.compile(r"\b([AEIOUaeiou][Ss])\b")
_STEMMED_SHORT = re.compile(r"\b([B-DF-HJ-NP-RT-Zb-df-hj-np-rt-z0-9][Ss]|[AEIOUaeiou][Yy])\b")
SHORT_MARK = "qmdshort"
PREFIX_MARK = "qmdprefix"

# Two rules of Porter's later algorithm that FTS5's `porter` follows and Snowball's (the 1980
# paper) lacks: step 2 turns `logi` into `log` and `bli` into `ble` where the stem before them
# has a vowel then a consonant. FTS5 stems `technology` `technolog` and `possibly` `possibl`;
# written `technolog` and `possible`, Snowball stems them so too.
_LOGI_BLI = re.compile(r"\b([A-Za-z0-9]+?)([Ll][Oo][Gg]|[Bb][Ll])([Yy]|[Ii][Ee][Ss])\b")


def _measure(stem: str) -> int:
    """Porter's m: how many vowel-consonant sequences `stem` holds (`y` after a consonant is
    a vowel)."""
    kinds = ""
    for ch in stem.lower():
        vowel = ch in "aeiou" or (ch == "y" and kinds[-1:] == "c")
        kinds += "v" if vowel else "c"
    return kinds.count("vc")


def _later_porter(found: re.Match[str]) -> str:
    stem, suffix = found.group(1), found.group(2).lower()
    if _measure(stem) == 0:
        return found.group(0)
    return stem + ("log" if suffix == "log" else "ble")


def tsquery_sql(text: str = "%s") -> str:
    """SQL that parses a rendered query (`text`: a parameter or a column) into a tsquery."""
    return f"replace(to_tsquery('{TS_CONFIG}', {text})::text, '{PREFIX_MARK}', '')::tsquery"


def _split(text: str) -> str:
    return _SEPARATORS.sub(" ", space_cjk(text)).strip()


def _as_fts5_stems(text: str) -> str:
    return _LOGI_BLI.sub(_later_porter, text)


def fold(text: str) -> str:
    text = _as_fts5_stems(_split(text))
    text = _VOWEL_S.sub(lambda found: found.group(1) + "ing", text)
    return _STEMMED_SHORT.sub(lambda found: found.group(1) + SHORT_MARK, text)


def _tokens(word: str) -> list[str]:
    return [token for token in _split(word).lower().split(" ") if token]


def render_term(term: LexTerm) -> str | None:
    tokens = [token for word in term.words for token in _tokens(word)]
    if not tokens:
        return None
    rendered = [f"'{fold(token)}'" for token in tokens]
    if term.prefix:
        # FTS5 completes the last word as typed (`ls*` is `lsof` and `ls` alike; `file's*` is
        # `file` then a word in `s`); a short word unstemmed, so marked for `tsquery_sql`
        last = tokens[-1]
        short = _STEMMED_SHORT.fullmatch(last) or _VOWEL_S.fullmatch(last)
        rendered[-1] = f"'{_as_fts5_stems(last)}{PREFIX_MARK if short else ''}':*"
    if len(rendered) == 1:
        return rendered[0]
    return "(" + " <-> ".join(rendered) + ")"


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
