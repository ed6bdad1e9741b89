"""VectorIndex contract: InMemoryStore and SqliteIndex store, find and report vectors alike."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from adapters.sqlite.store import SQLITE_VEC_MAX_K, SqliteIndex
from domain.errors import INVALID_ARGUMENT, QmdError
from tests.contract.conftest import StoreLike

T0 = "2025-01-01T00:00:00.000Z"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def add(store: StoreLike, collection: str, path: str, body: str) -> str:
    store.upsert_document(collection, path, path, sha(body), body, T0, T0)
    return sha(body)


def test_pending_hashes_until_complete(store: StoreLike) -> None:
    a = add(store, "c", "b-second.md", "alpha")
    b = add(store, "c", "a-first.md", "beta")
    add(store, "d", "z.md", "alpha")  # same content as a: one hash
    assert store.pending_hashes("m", "fp") == [b, a]  # ordered by first path
    assert store.pending_count("m", "fp") == 2
    assert not store.has_vector_index()
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0, 0.0]), (1, 50, [0.0, 1.0, 0.0])], "m", "fp", T0)
    assert store.has_vector_index()
    assert store.pending_hashes("m", "fp") == [b]
    assert store.pending_count("m", "fp") == 1
    # another model or fingerprint still needs everything
    assert store.pending_hashes("m", "other") == [b, a]
    assert store.pending_hashes("m2", "fp") == [b, a]
    # inactive documents need nothing
    store.deactivate_documents("c", ["a-first.md"])
    assert store.pending_hashes("m", "fp") == []
    assert store.pending_count("m", "fp") == 0


def test_store_replaces_previous_vectors(store: StoreLike) -> None:
    a = add(store, "c", "a.md", "alpha")
    store.store_chunk_vectors(
        a, [(0, 0, [1.0, 0.0]), (1, 10, [0.0, 1.0]), (2, 20, [0.7, 0.7])], "m", "fp", T0
    )
    store.store_chunk_vectors(a, [(0, 0, [0.0, 1.0])], "m", "fp", T0)
    hits = store.search_vectors([1.0, 0.0], 5, None)
    assert len(hits) == 1
    assert hits[0].distance == pytest.approx(1.0, abs=1e-6)
    assert hits[0].chunk_pos == 0


def test_search_dedups_by_document_and_orders_by_distance(store: StoreLike) -> None:
    a = add(store, "c", "a.md", "alpha")
    b = add(store, "c", "b.md", "beta")
    g = add(store, "other", "g.md", "gamma")
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0, 0.0]), (1, 40, [0.9, 0.1, 0.0])], "m", "f", T0)
    store.store_chunk_vectors(b, [(0, 0, [0.0, 1.0, 0.0]), (1, 7, [0.6, 0.8, 0.0])], "m", "f", T0)
    store.store_chunk_vectors(g, [(0, 3, [0.0, 0.0, 1.0])], "m", "f", T0)
    hits = store.search_vectors([1.0, 0.0, 0.0], 10, None)
    assert [h.document.meta.display_path for h in hits] == ["c/a.md", "c/b.md", "other/g.md"]
    assert hits[0].distance == pytest.approx(0.0, abs=1e-6)
    assert hits[0].chunk_pos == 0
    assert hits[1].distance == pytest.approx(0.4, abs=1e-5)
    assert hits[1].chunk_pos == 7
    assert hits[1].document.body == "beta"
    assert hits[2].distance == pytest.approx(1.0, abs=1e-6)
    # query closest to the second chunk of a.md picks that chunk's position
    best = store.search_vectors([0.9, 0.1, 0.0], 1, None)
    assert [(h.document.meta.path, h.chunk_pos) for h in best] == [("a.md", 40)]
    scoped = store.search_vectors([0.1, 0.2, 1.0], 10, "c")
    assert [h.document.meta.path for h in scoped] == ["b.md", "a.md"]
    assert store.search_vectors([0.0, 0.0, 1.0], 10, "nope") == []
    assert store.search_vectors([0.0, 0.0, 1.0], 0, None) == []


def test_shared_content_is_found_in_each_collection(store: StoreLike) -> None:
    h = add(store, "one", "x.md", "same")
    add(store, "two", "y.md", "same")
    store.store_chunk_vectors(h, [(0, 0, [1.0, 0.0])], "m", "f", T0)
    found = {hit.document.meta.display_path for hit in store.search_vectors([1.0, 0.0], 5, None)}
    assert found == {"one/x.md", "two/y.md"}
    assert [x.document.meta.path for x in store.search_vectors([1.0, 0.0], 5, "two")] == ["y.md"]
    store.deactivate_documents("one", ["x.md"])
    found = {hit.document.meta.display_path for hit in store.search_vectors([1.0, 0.0], 5, None)}
    assert found == {"two/y.md"}


def test_dimension_mismatch(store: StoreLike) -> None:
    a = add(store, "c", "a.md", "alpha")
    b = add(store, "c", "b.md", "beta")
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0, 0.0])], "m", "f", T0)
    with pytest.raises(QmdError) as info:
        store.store_chunk_vectors(b, [(0, 0, [1.0, 0.0])], "m", "f", T0)
    assert info.value.code == INVALID_ARGUMENT
    assert info.value.message == (
        "Embedding dimension mismatch: existing vectors are 3d but the current model produces 2d. "
        "Run 'qmd embed -f' to re-embed with the new model."
    )
    assert store.pending_hashes("m", "f") == [b]
    with pytest.raises(QmdError):
        store.search_vectors([1.0, 0.0], 3, None)


def test_clear_vectors_allows_a_new_dimension(store: StoreLike) -> None:
    a = add(store, "c", "a.md", "alpha")
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0, 0.0])], "m", "f", T0)
    store.clear_vectors()
    assert not store.has_vector_index()
    assert store.search_vectors([1.0, 0.0], 3, None) == []
    assert store.pending_hashes("m", "f") == [a]
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0])], "m2", "f2", T0)
    assert [h.document.meta.path for h in store.search_vectors([1.0, 0.0], 3, None)] == ["a.md"]
    assert store.pending_hashes("m2", "f2") == []


def _crowded(store: StoreLike) -> None:
    """30 `big` documents right next to the query direction, 3 `small` ones far from it."""
    for i in range(30):
        h = add(store, "big", f"b{i:02d}.md", f"big {i}")
        store.store_chunk_vectors(h, [(0, 0, [1.0, 0.01 * i, 0.0])], "m", "f", T0)
    for i in range(3):
        h = add(store, "small", f"s{i}.md", f"small {i}")
        store.store_chunk_vectors(
            h, [(0, 0, [0.1, 0.0, 1.0 - 0.1 * i]), (1, 9, [0.0, 1.0, 0.0])], "m", "f", T0
        )


def test_a_small_collection_is_not_starved_by_a_crowded_one(store: StoreLike) -> None:
    _crowded(store)
    query = [1.0, 0.0, 0.0]
    assert all(h.document.meta.collection == "big" for h in store.search_vectors(query, 5, None))
    scoped = store.search_vectors(query, 2, "small")
    # the small collection's own two nearest documents, though 30 others are nearer
    assert [h.document.meta.path for h in scoped] == ["s2.md", "s1.md"]
    assert [h.chunk_pos for h in scoped] == [0, 0]
    everything = store.search_vectors(query, 10, "small")
    assert [h.document.meta.path for h in everything] == ["s2.md", "s1.md", "s0.md"]


def test_collection_search_past_the_knn_cap(tmp_path: Path) -> None:
    # sqlite-vec answers at most SQLITE_VEC_MAX_K neighbours; when that many vectors of other
    # collections are all nearer, the adapter scores the collection's own chunks directly.
    index = SqliteIndex.open(tmp_path / "index.sqlite")
    try:
        with index.transaction():
            for i in range(SQLITE_VEC_MAX_K + 4):
                h = add(index, "big", f"b{i}.md", f"big {i}")
                index.store_chunk_vectors(h, [(0, 0, [1.0, 0.0001 * i, 0.0])], "m", "f", T0)
        _crowded(index)
        scoped = index.search_vectors([1.0, 0.0, 0.0], 2, "small")
        assert [h.document.meta.path for h in scoped] == ["s2.md", "s1.md"]
    finally:
        index.close()
