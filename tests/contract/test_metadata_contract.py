"""MetadataIndex contract, and the `within` candidate restriction of the lexical and vector
indexes (REQ-META-004, REQ-FILTER-003), for InMemoryStore and SqliteIndex alike."""

from __future__ import annotations

import hashlib

from domain.lexquery import parse_lex_query
from tests.contract.conftest import StoreLike

T0 = "2025-01-01T00:00:00.000Z"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def add(store: StoreLike, collection: str, path: str, body: str) -> int:
    store.upsert_document(collection, path, path, sha(body), body, T0, T0)
    meta = store.document_by_path(collection, path)
    assert meta is not None
    return meta.id


def test_metadata_follows_the_active_documents(store: StoreLike) -> None:
    a = add(store, "c", "a.md", "alpha")
    b = add(store, "c", "b.md", "beta")
    store.put_metadata("c", "a.md", {"tags": ("x", "y"), "size": 5, "draft": True})
    store.put_metadata("c", "nowhere.md", {"size": 1})  # no such document: nothing stored
    assert dict(store.active_metadata(None)) == {
        a: {"tags": ("x", "y"), "size": 5, "draft": True},
        b: {},
    }
    assert store.metadata_by_id([a, b]) == {a: {"tags": ("x", "y"), "size": 5, "draft": True}}
    # re-indexing changed content keeps the document (and its id); new metadata replaces old
    store.upsert_document("c", "a.md", "a.md", sha("alpha 2"), "alpha 2", T0, T0)
    store.put_metadata("c", "a.md", {"size": 7})
    assert store.metadata_by_id([a]) == {a: {"size": 7}}
    assert dict(store.active_metadata(["d"])) == {}
    store.deactivate_documents("c", ["a.md"])
    assert dict(store.active_metadata(None)) == {b: {}}
    store.rename_collection("c", "renamed")
    store.put_metadata("renamed", "b.md", {"author": "Ana"})
    assert dict(store.active_metadata(["renamed"])) == {b: {"author": "Ana"}}


def test_lexical_within_selects_before_the_limit(store: StoreLike) -> None:
    ids = [add(store, "c", f"d{i:02d}.md", "common " * (30 - i) + f"word{i}") for i in range(30)]
    query = parse_lex_query("common")
    top = store.search_lex(query, 3, None)
    assert [h.document.meta.id for h in top] == ids[:3]
    last = ids[-1]  # ranked last of 30: beyond any top-k window a post-filter would see
    hits = store.search_lex(query, 1, None, frozenset({last}))
    assert [h.document.meta.id for h in hits] == [last]
    hits = store.search_lex(query, 1, "c", frozenset({last, ids[-2]}))
    assert [h.document.meta.id for h in hits] == [ids[-2]]
    assert store.search_lex(query, 5, None, frozenset()) == []


def test_vector_within_selects_before_the_limit(store: StoreLike) -> None:
    ids = []
    for i in range(12):
        body = f"doc {i}"
        ids.append(add(store, "c", f"v{i:02d}.md", body))
        # document i points further from the query the larger i is
        store.store_chunk_vectors(sha(body), [(0, 0, [1.0, i / 4.0])], "m", "fp", T0)
    near = store.search_vectors([1.0, 0.0], 2, None)
    assert [h.document.meta.id for h in near] == ids[:2]
    far = store.search_vectors([1.0, 0.0], 1, None, frozenset({ids[-1]}))
    assert [h.document.meta.id for h in far] == [ids[-1]]
    scoped = store.search_vectors([1.0, 0.0], 2, "c", frozenset({ids[5], ids[9], ids[11]}))
    assert [h.document.meta.id for h in scoped] == [ids[5], ids[9]]
    assert store.search_vectors([1.0, 0.0], 2, None, frozenset()) == []
