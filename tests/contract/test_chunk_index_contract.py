"""The ChunkIndex / NamespaceRegistry / SummaryStore contract, run against the in-memory fake,
the SQLite tables and the PostgreSQL ones (REQ-PROJMEM-CHUNK-001, REQ-PROJMEM-CHUNK-002,
REQ-PROJMEM-NS-001)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from domain.ports import DocumentCut
from domain.sections import split_sections
from domain.text import content_hash
from tests.backend_locations import BACKENDS, opened_backend

T = "2025-01-01T00:00:00.000Z"
BODY = "# Auth\nintro\n## Tokens\nshort lived\n### Refresh\nrotate\n"
EDITED = "# Auth\nintro\n## Tokens\nshort lived, now signed\n"


@dataclass
class Pair:
    store: Any
    chunks: Any


@pytest.fixture(params=[*BACKENDS])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    with opened_backend(request.param, tmp_path) as backend:
        yield Pair(backend.index, backend.chunks)


def _add(pair: Pair, path: str, body: str) -> int:
    pair.store.upsert_document("notes", path, path, content_hash(body), body, T, T)
    meta = pair.store.document_by_path("notes", path)
    assert meta is not None
    return int(meta.id)


def test_rows_round_trip_in_sequence_order(pair: Pair) -> None:
    doc = _add(pair, "a.md", BODY)
    pair.chunks.replace_chunks([DocumentCut(doc, content_hash(BODY), split_sections(BODY))])
    rows = pair.chunks.document_chunks("notes", "a.md")
    assert [r.heading_path for r in rows] == ["Auth", "Auth > Tokens", "Auth > Tokens > Refresh"]
    assert [(r.start_line, r.end_line) for r in rows] == [(1, 2), (3, 4), (5, 6)]
    assert pair.chunks.get_chunks([rows[2].id, 10**9, rows[0].id]) == [rows[2], rows[0]]
    assert pair.chunks.unchunked_documents() == []
    assert pair.chunks.live_chunk_count() == 3


def test_unchunked_documents_are_those_without_rows_for_their_content(pair: Pair) -> None:
    first = _add(pair, "a.md", BODY)
    second = _add(pair, "b.md", EDITED)
    assert pair.chunks.unchunked_documents() == [
        (first, content_hash(BODY)),
        (second, content_hash(EDITED)),
    ]
    pair.chunks.replace_chunks([DocumentCut(first, content_hash(BODY), split_sections(BODY))])
    assert pair.chunks.unchunked_documents() == [(second, content_hash(EDITED))]
    _add(pair, "a.md", EDITED)  # new content: its rows are stale, the document unchunked
    assert pair.chunks.unchunked_documents() == [
        (first, content_hash(EDITED)),
        (second, content_hash(EDITED)),
    ]
    assert pair.chunks.prune() == 3 and pair.chunks.prune() == 0


def test_replaced_rows_get_new_ids_and_old_ids_are_never_served(pair: Pair) -> None:
    doc = _add(pair, "a.md", BODY)
    pair.chunks.replace_chunks([DocumentCut(doc, content_hash(BODY), split_sections(BODY))])
    old = [r.id for r in pair.chunks.document_chunks("notes", "a.md")]
    _add(pair, "a.md", EDITED)
    # rows cut from the previous content are stale: never served
    assert pair.chunks.document_chunks("notes", "a.md") == []
    assert pair.chunks.get_chunks(old) == []
    assert pair.chunks.live_chunk_count() == 0
    pair.chunks.replace_chunks([DocumentCut(doc, content_hash(EDITED), split_sections(EDITED))])
    new = pair.chunks.document_chunks("notes", "a.md")
    assert {r.id for r in new}.isdisjoint(old)
    assert new[-1].text == "## Tokens\nshort lived, now signed"


def test_rows_of_inactive_documents_are_not_served_and_can_be_deleted(pair: Pair) -> None:
    doc = _add(pair, "a.md", BODY)
    pair.chunks.replace_chunks([DocumentCut(doc, content_hash(BODY), split_sections(BODY))])
    pair.store.deactivate_documents("notes", ["a.md"])
    assert pair.chunks.document_chunks("notes", "a.md") == []
    assert pair.chunks.live_chunk_count() == 0
    assert pair.chunks.unchunked_documents() == []  # inactive documents need no rows
    assert pair.chunks.prune() == 3
    assert pair.chunks.prune() == 0


def test_namespace_ids_are_stable_and_distinct(pair: Pair) -> None:
    first = pair.chunks.namespace_ids(["notes", "archive"])
    assert len(set(first.values())) == 2
    again = pair.chunks.namespace_ids(["archive", "sessions", "notes"])
    assert again["notes"] == first["notes"] and again["archive"] == first["archive"]
    assert again["sessions"] not in first.values()


def test_summaries_are_stored_and_replaced(pair: Pair) -> None:
    assert pair.chunks.get_summary("s1") is None
    pair.chunks.put_summary("s1", '{"overview": "a"}', T)
    pair.chunks.put_summary("s1", '{"overview": "b"}', T)
    assert pair.chunks.get_summary("s1") == '{"overview": "b"}'
    assert pair.chunks.summarized_ids() == {"s1"}


def test_live_count_of_named_collections_only(pair: Pair) -> None:
    """What `projmem_status` counts under --force-root: the inside collections alone."""
    doc = _add(pair, "a.md", BODY)
    pair.chunks.replace_chunks([DocumentCut(doc, content_hash(BODY), split_sections(BODY))])
    pair.store.upsert_document("other", "b.md", "b", content_hash(EDITED), EDITED, T, T)
    other = pair.store.document_by_path("other", "b.md")
    assert other is not None
    cut = DocumentCut(int(other.id), content_hash(EDITED), split_sections(EDITED))
    pair.chunks.replace_chunks([cut])
    assert pair.chunks.live_chunk_count() == 5
    assert pair.chunks.live_chunk_count(["notes"]) == 3
    assert pair.chunks.live_chunk_count(["other", "nowhere"]) == 2
    assert pair.chunks.live_chunk_count([]) == 0
