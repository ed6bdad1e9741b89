"""QMD's lex query syntax parsed into a storage-neutral form.

Syntax (req LEX-1..LEX-8 in docs/spec/search.md): bare terms are prefix matches, `"…"` is an
exact phrase, a leading `-` negates a term or phrase, hyphenated words become phrases, dotted
tokens are split into ANDed parts, runs of CJK characters become phrases of single characters.
Only letters, digits, `'` and `_` survive inside a term; everything is lower-cased.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    clauses: tuple[LexClause, ...]

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


def parse_lex_query(text: str) -> LexQuery:
    """Parse raw user text; never raises on any input."""
    raise NotImplementedError


def space_cjk(text: str) -> str:
    """Rewrite every run of Han/Hiragana/Katakana/Hangul so each character is its own token."""
    raise NotImplementedError
