"""domain.lexfill: the fill of several scopes merged from each scope's own fill equals the
fill of the scopes searched as one (what Searcher and the root-scoped index rely on)."""

from __future__ import annotations

import itertools
import random

from domain.lexfill import FilledHits, filled_by_two_searches, merge_filled
from domain.lexquery import LexQuery, parse_lex_query
from domain.model import Document, DocumentMeta, LexHit

T0 = "2025-01-01T00:00:00.000Z"


def _hit(collection: str, n: int, bm25: float) -> LexHit:
    meta = DocumentMeta(n, collection, f"d{n}.md", f"T{n}", f"h{n}", T0, T0)
    return LexHit(document=Document(meta=meta, body=""), bm25=bm25)


def _index(rng: random.Random) -> dict[str, list[tuple[LexHit, bool]]]:
    """Per collection, its matching documents: (hit, whether it matches every term)."""
    ids = itertools.count()
    return {
        name: [
            (_hit(name, next(ids), -rng.uniform(0.1, 9.0)), rng.random() < 0.3)
            for _ in range(rng.randint(0, 12))
        ]
        for name in ("a", "b", "c")
    }


def _searcher(index: dict[str, list[tuple[LexHit, bool]]], names: list[str]):  # type: ignore[no-untyped-def]
    def search(query: LexQuery, limit: int) -> list[LexHit]:
        rows = [hit for name in names for hit, every in index[name] if query.match_any or every]
        return sorted(rows, key=lambda hit: hit.bm25)[:limit]

    return search


def _shown(filled: FilledHits) -> tuple[list[int], list[int]]:
    return [h.document.meta.id for h in filled[0]], [h.document.meta.id for h in filled[1]]


def test_merging_each_scopes_fill_is_the_fill_of_all_scopes_at_once() -> None:
    query = parse_lex_query("alpha beta")
    merged_with_fill = 0
    for seed in range(200):
        rng = random.Random(seed)
        index = _index(rng)
        limit = rng.choice([1, 2, 3, 5, 10, 40])
        parts = [filled_by_two_searches(_searcher(index, [name]), query, limit) for name in index]
        whole = filled_by_two_searches(_searcher(index, list(index)), query, limit)
        assert _shown(merge_filled(parts, limit)) == _shown(whole), seed
        merged_with_fill += bool(whole[1])
    assert merged_with_fill > 50  # most cases do fill: the comparison covers the merge


def test_a_scope_named_twice_counts_each_document_once() -> None:
    index = {"a": [(_hit("a", 1, -3.0), True), (_hit("a", 2, -2.0), False)]}
    part = filled_by_two_searches(_searcher(index, ["a"]), parse_lex_query("x y"), 5)
    assert _shown(merge_filled([part, part], 5)) == ([1], [2])
