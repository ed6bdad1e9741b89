"""Render a parsed `LexQuery` as an FTS5 MATCH expression, the way the original builds it.

* prefix term → `"word"*`; phrase (or non-prefix term) → `"a b"`;
* a clause with several terms (a dotted token) → its terms joined with ` AND `; when positive
  they are flattened into the outer AND list, when negated the group is wrapped in parentheses;
* positives joined with ` AND `, then ` NOT {negative}` appended for each negative clause;
* no positive clause → `None` (nothing to search);
* `match_any` queries join the positive clauses with ` OR ` instead (recall fallback).

Quotes inside a word are escaped by doubling, so the output is always a valid FTS5 string.
"""

from __future__ import annotations

from domain.lexquery import LexClause, LexQuery, LexTerm


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def render_term(term: LexTerm) -> str | None:
    words = [w for w in term.words if w and w.strip()]
    if not words:
        return None
    if term.prefix and len(words) == 1:
        return _quote(words[0]) + "*"
    return _quote(" ".join(words))


def _render_parts(clause: LexClause) -> list[str]:
    return [part for part in (render_term(t) for t in clause.terms) if part is not None]


def render_fts_query(query: LexQuery) -> str | None:
    positives: list[str] = []
    negatives: list[str] = []
    for clause in query.clauses:
        parts = _render_parts(clause)
        if not parts:
            continue
        if clause.negated:
            negatives.append(parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")")
        elif query.match_any:
            positives.append(parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")")
        else:
            positives.extend(parts)
    if not positives:
        return None
    if query.match_any:
        result = " OR ".join(positives)
        if negatives and len(positives) > 1:
            result = f"({result})"
    else:
        result = " AND ".join(positives)
    for negative in negatives:
        result = f"{result} NOT {negative}"
    return result
