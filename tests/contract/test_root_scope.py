"""The `--force-root` scope decorates every storage port: over the fake and over SQLite, a scoped
read answers exactly what the inner port answers for the collections inside the root, and
nothing of the others (seed 001 INV-1)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from adapters.fs.scope import (
    RootScope,
    RootScopedLexicalIndex,
    RootScopedStore,
    RootScopedVectorIndex,
)
from domain.lexquery import parse_lex_query
from domain.model import Collection
from tests.contract.conftest import StoreLike

T0 = "2025-01-01T00:00:00.000Z"
SHARED_BODY = "# Shared\n\nThe same words in both places: zebra lantern.\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def layout(tmp_path: Path, store: StoreLike) -> tuple[StoreLike, RootScope]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    for folder in (root / "notes", root / "more", outside / "secret"):
        folder.mkdir(parents=True)
    (root / "link").symlink_to(outside / "secret")  # lexically inside, really outside
    collections = {
        "notes": str(root / "notes"),
        "more": str(root / "more") + "/",
        "secret": str(outside / "secret"),
        "sneaky": str(root / "notes" / ".." / ".." / "outside" / "secret"),
        "linked": str(root / "link"),
        "relative": "notes",  # never resolved against the current directory
        "empty": "",
    }
    for name, path in collections.items():
        store.put_collection(Collection(name=name, path=path))
        body = f"# {name}\n\nzebra lantern in {name}.\n"
        store.upsert_document(name, f"{name}.md", name, sha(body), body, T0, T0)
    # the same content inside and outside: one hash, so one docid for both
    store.upsert_document("secret", "shared.md", "Shared", sha(SHARED_BODY), SHARED_BODY, T0, T0)
    store.upsert_document("notes", "shared.md", "Shared", sha(SHARED_BODY), SHARED_BODY, T0, T0)
    return store, RootScope(str(root), store)


INSIDE = {"notes", "more"}


def test_only_collections_inside_the_root_exist(layout: tuple[StoreLike, RootScope]) -> None:
    inner, scope = layout
    scoped = RootScopedStore(inner, scope)
    assert {c.name for c in scoped.list_collections()} == INSIDE
    assert list(scoped.read_catalog().collections) == scoped.list_collections()
    for collection in inner.list_collections():
        expected = collection if collection.name in INSIDE else None
        assert scoped.get_collection(collection.name) == expected
        if collection.name not in INSIDE:
            assert scoped.active_documents(collection.name) == {}
            assert scoped.documents(collection.name) == []
            assert scoped.document_by_path(collection.name, f"{collection.name}.md") is None
    assert {c.name for c in scoped.collection_counts()} == INSIDE
    assert scoped.documents() == [m for m in inner.documents() if m.collection in INSIDE]


def test_lookups_never_return_an_outside_document(layout: tuple[StoreLike, RootScope]) -> None:
    inner, scope = layout
    scoped = RootScopedStore(inner, scope)
    for meta in inner.documents():
        by_docid = scoped.document_by_docid(meta.hash[:6])
        by_suffix = scoped.document_by_suffix(meta.path)
        for found in (by_docid, by_suffix):
            assert found is None or found.collection in INSIDE
        if meta.collection in INSIDE:
            assert by_docid is not None and by_docid.hash == meta.hash
            assert by_suffix is not None and by_suffix.path == meta.path
    # a docid shared with an outside document still finds the inside one
    shared = scoped.document_by_docid(sha(SHARED_BODY)[:6])
    assert shared is not None and shared.collection == "notes"
    assert scoped.document_by_docid("0000000") is None


def test_search_hits_come_only_from_inside(layout: tuple[StoreLike, RootScope]) -> None:
    inner, scope = layout
    lexical = RootScopedLexicalIndex(inner, scope)
    query = parse_lex_query("zebra")
    everything = inner.search_lex(query, 50, None)
    assert {h.document.meta.collection for h in everything} > INSIDE
    scoped = lexical.search_lex(query, 50, None)
    assert {h.document.meta.collection for h in scoped} == INSIDE
    assert [h.bm25 for h in scoped] == sorted(h.bm25 for h in scoped)
    assert len(lexical.search_lex(query, 1, None)) == 1
    assert lexical.search_lex(query, 50, "secret") == []
    assert {h.document.meta.collection for h in lexical.search_lex(query, 50, "more")} == {"more"}


def test_vector_hits_come_only_from_inside(layout: tuple[StoreLike, RootScope]) -> None:
    inner, scope = layout
    for number, meta in enumerate(inner.documents()):
        angle = 0.01 * number
        inner.store_chunk_vectors(meta.hash, [(0, 0, [1.0, angle, 0.0])], "m", "fp", T0)
    vectors = RootScopedVectorIndex(inner, RootScopedStore(inner, scope), scope)
    everything = inner.search_vectors([1.0, 0.0, 0.0], 50, None)
    assert {h.document.meta.collection for h in everything} > INSIDE
    scoped = vectors.search_vectors([1.0, 0.0, 0.0], 50, None)
    assert {h.document.meta.collection for h in scoped} == INSIDE
    assert [h.distance for h in scoped] == sorted(h.distance for h in scoped)
    assert vectors.search_vectors([1.0, 0.0, 0.0], 50, "secret") == []


def test_an_empty_allow_list_allows_nothing(tmp_path: Path, store: StoreLike) -> None:
    (tmp_path / "root").mkdir()
    store.put_collection(Collection(name="elsewhere", path=str(tmp_path / "elsewhere")))
    body = "# Elsewhere\n\nzebra\n"
    store.upsert_document("elsewhere", "e.md", "Elsewhere", sha(body), body, T0, T0)
    store.store_chunk_vectors(sha(body), [(0, 0, [1.0, 0.0])], "m", "fp", T0)
    scope = RootScope(str(tmp_path / "root"), store)
    assert RootScopedStore(store, scope).documents() == []
    assert RootScopedLexicalIndex(store, scope).search_lex(parse_lex_query("zebra"), 5, None) == []
    vectors = RootScopedVectorIndex(store, RootScopedStore(store, scope), scope)
    assert vectors.search_vectors([1.0, 0.0], 5, None) == []


def test_scope_is_decided_again_on_every_call(layout: tuple[StoreLike, RootScope]) -> None:
    inner, scope = layout
    scoped = RootScopedStore(inner, scope)
    notes = inner.get_collection("notes")
    assert notes is not None
    os.rename(notes.path, notes.path + "-moved")
    os.symlink(str(Path(notes.path).parent.parent / "outside" / "secret"), notes.path)
    assert "notes" not in {c.name for c in scoped.list_collections()}


def test_embedding_backlog_counts_inside_documents_only(
    layout: tuple[StoreLike, RootScope],
) -> None:
    inner, scope = layout
    vectors = RootScopedVectorIndex(inner, RootScopedStore(inner, scope), scope)
    inside_hashes = {m.hash for m in inner.documents() if m.collection in INSIDE}
    assert len(inner.pending_hashes("m", "fp")) > len(inside_hashes)
    assert set(vectors.pending_hashes("m", "fp")) == inside_hashes
    assert vectors.pending_count("m", "fp") == len(inside_hashes)
