"""The expansions a search uses: each distinct one once, a few of each kind
(REQ-SEARCH-EXPAND-DISTINCT-001).

A small generator repeats itself (gemma-3-270m wrote one line 65 times in one answer): every
copy searched is one more ranked list in the fusion, so the copies outweigh the caller's own
query. Two expansions are the same search when they go to the same index with the same text:

* `lex` (BM25): when they parse to the same keyword query (`domain.lexquery`: case and
  punctuation inside words ignored; phrases, hyphenated words and `-exclusions` kept, since
  they change what matches);
* `vec` and `hyde` (both embedded and searched in the vector index): when their text is equal
  once Unicode-normalised (NFKC), case-folded, with punctuation and symbols dropped and
  whitespace collapsed.

An expansion that is the same search as the caller's query (searched already, twice
weighted) is dropped, and of each kind only the first `per_kind` distinct ones are kept, in
the order the model wrote them (the profile says how many: `EXPANSIONS_PER_KIND` in
domain/profiles.py on this project's surfaces).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from domain.lexquery import LexQuery, parse_lex_query
from domain.model import SubQuery


def normalised_text(text: str) -> str:
    """`text` as the vector searches compare it: NFKC, case-folded, punctuation and symbols
    dropped, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = [" " if unicodedata.category(ch)[0] in "PSCZ" else ch for ch in folded]
    return " ".join("".join(kept).split())


def distinct_expansions(
    query: str, expansions: Sequence[SubQuery], per_kind: int
) -> list[SubQuery]:
    """The expansions worth searching: no two the same search, none the same as `query`, at
    most `per_kind` of each type, in the order given."""
    seen_lex: set[LexQuery] = {parse_lex_query(query)}
    seen_vec: set[str] = {normalised_text(query)}
    counts: dict[str, int] = {}
    kept: list[SubQuery] = []
    for sub in expansions:
        if counts.get(sub.type, 0) >= per_kind:
            continue
        if sub.type == "lex":
            lex = parse_lex_query(sub.query)
            if not lex.is_searchable or lex in seen_lex:
                continue
            seen_lex.add(lex)
        else:
            text = normalised_text(sub.query)
            if not text or text in seen_vec:
                continue
            seen_vec.add(text)
        counts[sub.type] = counts.get(sub.type, 0) + 1
        kept.append(sub)
    return kept
