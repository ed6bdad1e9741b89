"""A document's full-text row built in Python, the same tsvector the server's `fts_vector_sql`
computes, for the batches of an indexing run (issue 36, REQ-INDEX-BATCH-001).

On the server each row cost three `to_tsvector` calls (PostgreSQL's parser and Porter's
stemmer over every word of the path, the title and the body), then a count of its tokens:
1.1 of the 3.2 CPU seconds the server spent on 10,000 documents. A corpus repeats its words,
so here each distinct word is analysed once by the server (`to_tsvector` of that word alone,
as `fold` writes it) and remembered; a document's row is then put together from its words'
lexemes as `to_tsvector`, `setweight`, `||` and `ts_delete` put it together (for the
common document in C-level loops: `map`, `join`), and sent as tsvector's text, which the
server reads for a fraction of what `to_tsvector` costs, with its token count. Only a word the
run has not met is folded (`fold`'s regular expressions ran over every text before).

Why a word can be analysed alone: `fold` leaves only letters, digits and single spaces, and
PostgreSQL's parser starts afresh after a space (every token type that spans more than
letters and digits needs punctuation), so a word yields the same lexemes, at the same
positions relative to it, alone as in its text. `fold` itself works word by word (its rules
are anchored at word boundaries), so a text's fold is its words' folds joined by spaces.
tests/integration/test_postgres_tsvector.py holds both to the server's own result over
words of every kind the parser distinguishes.

PostgreSQL's limits, kept: a part's lexeme keeps its first 255 positions (`to_tsvector`),
a concatenated one its first 256 (`||`). A text whose positions would reach the last one a
tsvector holds (16,383, where PostgreSQL starts clamping) is left to the server
(`build` answers None).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

import psycopg

from adapters.postgres.fts import COLUMN_SEPARATOR
from adapters.postgres.tsquery import MAX_INDEXED_CHARS, TS_CONFIG, fold
from domain.lexquery import space_cjk

# the words FTS5's unicode61 sees, as `fold` splits them (runs of letters and digits)
_WORDS = re.compile(r"[^\W_]+")
# tsvector's limits (PostgreSQL's ts_type.h): positions from 1 to 16383, a lexeme of one
# `to_tsvector` keeps 255 of them (MAXNUMPOS - 1), a concatenation 256 (MAXNUMPOS)
_LAST_POSITION = 16383
_PART_POSITIONS = 255
_JOINED_POSITIONS = 256
# the columns' weights (path C, title B, body D) in a position's top two bits, and as written
_WEIGHTS = (1 << 14, 2 << 14, 0)
_WEIGHT_LETTERS = "DCBA"
# ":<position><weight>" for every position, per column: a lexeme and its position are
# joined by `str.__add__` in C (`format` per word cost twice as much)
_SUFFIXES = tuple([f":{n}{letter}" for n in range(_LAST_POSITION)] for letter in ("C", "B", ""))
# a run meeting more distinct words forgets them all past this many (they are asked again);
# the index forgets them at the end of every run (`tidy_lexical_index`)
_MAX_REMEMBERED = 200_000


def quoted(lexeme: str) -> str:
    """A lexeme as tsvector's text writes it."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


# the column separator's lexemes, unstemmed and stemmed (fts.SEPARATOR_LEXEMES), which
# `ts_delete` takes out of every row
_SEPARATORS = frozenset(quoted(lexeme) for lexeme in (COLUMN_SEPARATOR, "qmdcolumnsepar"))

# a word's lexemes (quoted) and their positions relative to the word, in order
Analysis = tuple[tuple[str, int], ...]


# ASCII's separators (all but letters and digits) as spaces: an ASCII text split in C
_ASCII_SPACES = str.maketrans(
    {chr(c): " " for c in range(128) if not chr(c).isalnum() and not chr(c).isspace()}
)


_PLAIN_VECTOR = re.compile(r"('[^'\\]*'):1")


def fold_word(word: str) -> str:
    """`fold` of one word (`fold` rewrites only words of two characters or ending in `s` or
    `y`). The separator is appended to the folded text unfolded, and fold leaves it alone."""
    if len(word) > 2 and word[-1] not in "sSyY":
        return word
    return fold(word)


def words(text: str) -> list[str]:
    """The words of `text` as `fold` splits them, before `fold` rewrites any."""
    if text.isascii():
        return text.translate(_ASCII_SPACES).split()
    return _WORDS.findall(space_cjk(text))


def document_words(collection: str, path: str, title: str, body: str) -> list[list[str]]:
    """The words of a document's three columns (`fts.fts_params`' texts)."""
    return [words(f"{collection}/{path}"), words(title), words(body[:MAX_INDEXED_CHARS])]


class Lexemes:
    """The server's analysis of each word met so far (the words of one index: another
    index's text search configuration may differ)."""

    def __init__(self) -> None:
        self._plain: dict[str, str] = {}  # a word that is one lexeme at its own position
        self._other: dict[str, Analysis] = {}  # anything else (none, or several)

    def learn(self, conn: psycopg.Connection[Any], texts: Iterable[Sequence[str]]) -> None:
        """Ask the server, in one statement, for the words of `texts` not yet known."""
        unknown = set(chain.from_iterable(texts))
        unknown.add(COLUMN_SEPARATOR)
        unknown.difference_update(self._plain)
        unknown.difference_update(self._other)
        if not unknown:
            return
        if len(self._plain) + len(self._other) + len(unknown) > _MAX_REMEMBERED:
            self._plain.clear()
            self._other.clear()
            unknown.add(COLUMN_SEPARATOR)
        asked = sorted(unknown)
        # a word of one lexeme at position 1 reads `'lexeme':1`, quoted as `quoted` quotes
        other: list[str] = []
        for word, vector in zip(asked, self._vectors(conn, asked), strict=True):
            plain = _PLAIN_VECTOR.fullmatch(vector)
            if plain is not None and plain.group(1) not in _SEPARATORS:
                self._plain[word] = plain.group(1)
            else:  # (a word of the separator's lexemes goes the exact way, which deletes them)
                other.append(word)
        if not other:
            return
        found: dict[int, list[tuple[int, str]]] = {}
        for i, lexeme, positions in conn.execute(
            "SELECT w.i, v.lexeme, v.positions FROM unnest(%s::text[]) WITH ORDINALITY w(t, i),"
            f" LATERAL unnest(to_tsvector('{TS_CONFIG}', w.t)) v",
            ([fold_word(word) for word in other],),
        ).fetchall():
            found.setdefault(int(i) - 1, []).extend((int(p), quoted(lexeme)) for p in positions)
        for i, word in enumerate(other):
            self._other[word] = tuple((lexeme, p) for p, lexeme in sorted(found.get(i, [])))

    @staticmethod
    def _vectors(conn: psycopg.Connection[Any], asked: list[str]) -> list[str]:
        """Each word's tsvector alone, as text, in order."""
        rows = conn.execute(
            f"SELECT to_tsvector('{TS_CONFIG}', w)::text FROM unnest(%s::text[]) WITH ORDINALITY"
            " u(w, i) ORDER BY i",
            ([fold_word(word) for word in asked],),
        ).fetchall()
        return [str(row[0]) for row in rows]

    def build(self, parts: Sequence[Sequence[str]]) -> tuple[str, int] | None:
        """The tsvector (as text) of a document's three columns' words (`document_words`,
        every word learnt) and its token count; None where the server must compute it.

        The common document, every word one lexeme (not the separator's) and none repeated
        past what a column keeps, is written in one pass: each column starts where `||`
        starts it, after the previous one's words and its separator."""
        lexeme = self._plain.__getitem__
        try:
            path = list(map(lexeme, parts[0]))
            title = list(map(lexeme, parts[1]))
            body = list(map(lexeme, parts[2]))
        except KeyError:  # a word of no lexeme or several
            return self._exact(parts)
        ends = len(path) + 1, len(path) + len(title) + 2
        if ends[1] + len(body) >= _LAST_POSITION:
            return None
        if len(path) + len(title) + len(body) > _PART_POSITIONS:
            counts = Counter(path)
            counts.update(title)
            counts.update(body)
            if max(counts.values()) > _PART_POSITIONS:
                return self._exact(parts)
        c, b, d = _SUFFIXES
        text = " ".join(
            chain(
                map(str.__add__, path, c[1 : ends[0]]),
                map(str.__add__, title, b[ends[0] + 1 : ends[1]]),
                map(str.__add__, body, d[ends[1] + 1 : ends[1] + 1 + len(body)]),
            )
        )
        return text, len(path) + len(title) + len(body)

    def _exact(self, parts: Sequence[Sequence[str]]) -> tuple[str, int] | None:
        """The row put together column by column, as PostgreSQL caps each step."""
        joined: dict[str, list[int]] = {}
        offset = 0
        for n, (words_, weight) in enumerate(zip(parts, _WEIGHTS, strict=True)):
            part = self._part([*words_, COLUMN_SEPARATOR] if n < 2 else words_)
            if part is None or offset + part[1] >= _LAST_POSITION:
                return None
            top = 0  # the last position this part adds to the vector
            for lexeme, positions in part[0].items():
                known = joined.get(lexeme)
                room = _PART_POSITIONS if known is None else _JOINED_POSITIONS - len(known)
                kept = positions[: min(room, _PART_POSITIONS)]
                if not kept:
                    continue
                top = max(top, kept[-1])
                shifted = [offset + p | weight for p in kept]
                if known is None:
                    joined[lexeme] = shifted
                else:
                    known.extend(shifted)
            offset += top  # `||` shifts the right side by the left side's last position
        for separator in _SEPARATORS:  # `ts_delete`
            joined.pop(separator, None)
        text = " ".join(
            lexeme + ":" + ",".join(f"{p & 0x3FFF}{_WEIGHT_LETTERS[p >> 14]}" for p in positions)
            for lexeme, positions in joined.items()
        )
        return text, sum(len(positions) for positions in joined.values())

    def _part(self, words_: Sequence[str]) -> tuple[dict[str, list[int]], int] | None:
        """One column's lexemes with their positions (from 1), and the positions it used;
        None when a word was forgotten meanwhile (another thread's batch)."""
        lexemes: dict[str, list[int]] = {}
        position = 0
        for word in words_:
            lexeme = self._plain.get(word)
            analysis = ((lexeme, 1),) if lexeme is not None else self._other.get(word)
            if analysis is None:
                return None
            for found, relative in analysis:
                lexemes.setdefault(found, []).append(position + relative)
            if analysis:
                position += analysis[-1][1]
        return lexemes, position
