"""The any-term fill (REQ-SPEC-SEARCH-005) as one lexical index call: a query's every-term
matches, and, when they are fewer than the limit, its any-term matches that are not among
them. `filled_by_two_searches` is its meaning, two plain searches; an index with a cheaper
plan (PostgreSQL shares the corpus figures both need) gives the same hits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from domain.lexquery import LexQuery
from domain.model import LexHit

# (every-term hits best first, up to the limit; any-term hits not among them, best first, up
# to the limit less the every-term hits)
FilledHits = tuple[list[LexHit], list[LexHit]]


def filled_by_two_searches(
    search: Callable[[LexQuery, int], list[LexHit]], query: LexQuery, limit: int
) -> FilledHits:
    """`search(query, limit)` run with every term required, then, when that leaves room, with
    any term (asking for as many more as it found, which the fill then leaves out)."""
    every = search(replace(query, match_any=False), limit)
    if len(every) >= limit:
        return every, []
    seen = {_key(hit) for hit in every}
    wider = search(replace(query, match_any=True), limit + len(every))
    return every, [hit for hit in wider if _key(hit) not in seen][: limit - len(every)]


def merge_filled(parts: Sequence[FilledHits], limit: int) -> FilledHits:
    """The fill over several scopes (collections), from each scope's own: each rule's hits
    merged, best per document first. When the merged every-term hits fall short of `limit`,
    each scope's were all of its own, and each scope's fill left room for at least as many as
    the merged fill keeps, so this is the fill of the scopes searched as one."""
    every = _best([hit for part in parts for hit in part[0]], limit)
    if len(every) >= limit:
        return every, []
    return every, _best([hit for part in parts for hit in part[1]], limit - len(every))


def _best(hits: list[LexHit], limit: int) -> list[LexHit]:
    """The best hit per document (the lowest bm25, FTS5's sign), best first, stable for ties."""
    best: dict[tuple[str, str], LexHit] = {}
    for hit in hits:
        key = _key(hit)
        if key not in best or hit.bm25 < best[key].bm25:
            best[key] = hit
    return sorted(best.values(), key=lambda hit: hit.bm25)[:limit]


def _key(hit: LexHit) -> tuple[str, str]:
    return (hit.document.meta.collection, hit.document.meta.path)
