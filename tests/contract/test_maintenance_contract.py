"""IndexMaintenance contract: the fake and SQLite count, preview and clean up alike."""

from __future__ import annotations

import hashlib

from tests.contract.conftest import StoreLike

T0 = "2025-01-01T00:00:00.000Z"


def _add(store: StoreLike, path: str, body: str) -> str:
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    store.upsert_document("c", path, path, digest, body, T0, T0)
    return digest


def test_counts_preview_and_cleanup_agree(store: StoreLike) -> None:
    assert store.vec_available
    assert store.lexical_ranking.strip(), "doctor names how lexical search ranks"
    kept = _add(store, "kept.md", "kept body")
    gone = _add(store, "gone.md", "gone body")
    store.store_chunk_vectors(kept, [(0, 0, [1.0, 0.0])], "m", "fp", T0)
    store.store_chunk_vectors(gone, [(0, 0, [0.0, 1.0]), (1, 5, [0.6, 0.8])], "m", "fp", T0)
    store.put("cache-key", "cached")
    assert store.total_documents() == 2
    assert store.vector_count() == 3
    assert store.embedded_by_model() == {"m": 2}
    store.deactivate_documents("c", ["gone.md"])
    assert store.total_documents() == 1
    expected = {
        "cache_entries": 1,
        "orphaned_vectors": 2,
        "inactive_documents": 1,
        "orphaned_content": 1,
    }
    # the orphans of the removed document are no longer counted as embedded
    assert (store.vector_count(), store.orphaned_vector_count()) == (1, 2)
    assert store.preview_cleanup() == expected
    assert store.orphaned_vector_count() == 2  # previewing changes nothing
    assert store.cleanup() == expected
    assert (store.vector_count(), store.orphaned_vector_count()) == (1, 0)
    assert store.preview_cleanup() == dict.fromkeys(expected, 0)
    assert store.embedded_by_model() == {"m": 1}  # only active documents count


def test_embedded_by_model_names_the_model_of_each_vector_set(store: StoreLike) -> None:
    first = _add(store, "a.md", "first body")
    second = _add(store, "b.md", "second body")
    store.store_chunk_vectors(first, [(0, 0, [1.0, 0.0])], "old-model", "fp1", T0)
    store.store_chunk_vectors(second, [(0, 0, [0.0, 1.0])], "new-model", "fp2", T0)
    assert store.embedded_by_model() == {"new-model": 1, "old-model": 1}
