"""DocumentStore contract: InMemoryStore, SqliteIndex and PostgresIndex behave the same."""

from __future__ import annotations

import hashlib

import pytest

from domain.errors import CONFLICT, NOT_FOUND, QmdError
from domain.lexquery import parse_lex_query
from domain.model import Collection, CollectionCatalog
from domain.ports import DocumentWrite
from tests.contract.conftest import StoreLike

T0 = "2025-01-01T00:00:00.000Z"
T1 = "2025-02-01T00:00:00.000Z"
T2 = "2025-03-01T00:00:00.000Z"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def put(
    store: StoreLike, collection: str, path: str, body: str, title: str = "T", when: str = T0
) -> str:
    return store.upsert_document(collection, path, title, sha(body), body, T0, when).kind


def test_upsert_outcomes_and_metadata(store: StoreLike) -> None:
    assert put(store, "notes", "a.md", "alpha body", "Alpha") == "indexed"
    assert put(store, "notes", "a.md", "alpha body", "Alpha", T1) == "unchanged"
    meta = store.document_by_path("notes", "a.md")
    assert meta is not None
    assert (meta.title, meta.hash, meta.modified_at, meta.created_at) == (
        "Alpha",
        sha("alpha body"),
        T0,
        T0,
    )
    # same hash, new title: title (and modified_at) updated
    assert put(store, "notes", "a.md", "alpha body", "Alpha 2", T1) == "updated"
    meta = store.document_by_path("notes", "a.md")
    assert meta is not None and meta.title == "Alpha 2" and meta.modified_at == T1
    # new content: hash/title/modified_at updated, id and created_at kept
    assert put(store, "notes", "a.md", "alpha changed", "Alpha 3", T2) == "updated"
    changed = store.document_by_path("notes", "a.md")
    assert changed is not None
    assert changed.id == meta.id and changed.created_at == T0
    assert changed.hash == sha("alpha changed")
    assert (changed.title, changed.modified_at) == ("Alpha 3", T2)
    assert store.body(changed.hash) == "alpha changed"
    assert changed.body_length == len("alpha changed")
    assert changed.docid == sha("alpha changed")[:6]


def test_content_is_shared_and_orphans_are_deleted(store: StoreLike) -> None:
    put(store, "a", "x.md", "same body")
    put(store, "b", "y.md", "same body")
    assert store.document_by_path("a", "x.md").hash == store.document_by_path("b", "y.md").hash  # type: ignore[union-attr]
    put(store, "a", "x.md", "new body")
    assert store.delete_orphan_content() == 0  # still used by b/y.md
    put(store, "b", "y.md", "another body")
    assert store.delete_orphan_content() == 1
    with pytest.raises(QmdError) as info:
        store.body(sha("same body"))
    assert info.value.code == NOT_FOUND


def test_soft_delete_and_reactivation(store: StoreLike) -> None:
    put(store, "c", "one.md", "one")
    put(store, "c", "two.md", "two")
    first_id = store.document_by_path("c", "one.md").id  # type: ignore[union-attr]
    assert store.deactivate_documents("c", ["one.md", "missing.md"]) == 1
    assert store.deactivate_documents("c", ["one.md"]) == 0
    assert store.document_by_path("c", "one.md") is None
    assert list(store.active_documents("c")) == ["two.md"]
    assert [m.path for m in store.documents()] == ["two.md"]
    # an inactive row's content is still pinned until cleanup
    assert store.delete_orphan_content() == 0
    assert store.body(sha("one")) == "one"
    # the same path coming back reactivates the old row
    assert put(store, "c", "one.md", "one again", "Back", T1) == "indexed"
    back = store.document_by_path("c", "one.md")
    assert back is not None and back.id == first_id and back.title == "Back"
    assert [m.path for m in store.documents("c")] == ["one.md", "two.md"]


def test_documents_are_ordered_by_id_and_filtered(store: StoreLike) -> None:
    put(store, "b", "z.md", "z")
    put(store, "a", "y.md", "y")
    put(store, "b", "a.md", "a")
    assert [m.display_path for m in store.documents()] == ["b/z.md", "a/y.md", "b/a.md"]
    assert [m.path for m in store.documents("b")] == ["z.md", "a.md"]
    assert store.documents("nope") == []
    assert store.document_paths() == [("b", "z.md"), ("a", "y.md"), ("b", "a.md")]
    store.deactivate_documents("a", ["y.md"])
    assert store.document_paths() == [("b", "z.md"), ("b", "a.md")]


def test_docid_lookup(store: StoreLike) -> None:
    put(store, "c", "a.md", "first")
    put(store, "c", "b.md", "second")
    h = sha("second")
    found = store.document_by_docid(h[:6])
    assert found is not None and found.path == "b.md"
    assert store.document_by_docid(h[:6].upper()).path == "b.md"  # type: ignore[union-attr]
    assert store.document_by_docid(h) is not None
    assert store.document_by_docid("zzzzzz") is None
    assert store.document_by_docid("%") is None
    assert store.document_by_docid("") is None
    store.deactivate_documents("c", ["b.md"])
    assert store.document_by_docid(h[:6]) is None


def test_suffix_lookup_is_unanchored_case_insensitive_lowest_id(store: StoreLike) -> None:
    put(store, "notes", "old-readme.md", "old")
    put(store, "notes", "docs/readme.md", "new")
    put(store, "other", "README.md", "other")
    hit = store.document_by_suffix("readme.md")
    assert hit is not None and hit.display_path == "notes/old-readme.md"
    assert store.document_by_suffix("DOCS/README.MD").display_path == "notes/docs/readme.md"  # type: ignore[union-attr]
    assert store.document_by_suffix("qmd://other/README.md").collection == "other"  # type: ignore[union-attr]
    # LIKE wildcards in the input are literal
    assert store.document_by_suffix("%.md") is None
    assert store.document_by_suffix("old_readme.md") is None
    assert store.document_by_suffix("nothing.md") is None
    store.deactivate_documents("notes", ["old-readme.md"])
    assert store.document_by_suffix("readme.md").display_path == "notes/docs/readme.md"  # type: ignore[union-attr]


def test_collection_counts(store: StoreLike) -> None:
    put(store, "b", "1.md", "1", when=T1)
    put(store, "b", "2.md", "2", when=T2)
    put(store, "a", "3.md", "3", when=T0)
    put(store, "a", "4.md", "4", when=T0)
    store.deactivate_documents("a", ["4.md"])
    counts = [(c.name, c.documents, c.last_modified) for c in store.collection_counts()]
    assert counts == [("a", 1, T0), ("b", 2, T2)]


def test_collections_round_trip(store: StoreLike) -> None:
    full = Collection(
        name="docs",
        path="/srv/docs",
        pattern="**/*.{md,txt}",
        ignore=("drafts/**", "*.tmp"),
        include_by_default=False,
        update_command="git pull",
        contexts={"": "All docs", "api": "API 日本"},
    )
    store.put_collection(Collection(name="zeta", path="/srv/zeta"))
    store.put_collection(full)
    assert store.get_collection("docs") == full
    assert store.get_collection("zeta") == Collection(name="zeta", path="/srv/zeta")
    assert [c.name for c in store.list_collections()] == ["zeta", "docs"]
    store.put_collection(Collection(name="zeta", path="/srv/zeta2"))
    assert [c.path for c in store.list_collections()] == ["/srv/zeta2", "/srv/docs"]
    assert store.get_collection("missing") is None


def test_global_context(store: StoreLike) -> None:
    assert store.get_global_context() is None
    store.set_global_context("Everything")
    assert store.get_global_context() == "Everything"
    store.set_global_context(None)
    assert store.get_global_context() is None


def test_the_catalog_is_the_collections_and_the_global_context_in_one_read(
    store: StoreLike,
) -> None:
    # the global context is there with no collection, and read afresh on every call (another
    # process may change it); collections come in the order they were added
    assert store.read_catalog() == CollectionCatalog((), None)
    store.set_global_context("Everything")
    assert store.read_catalog() == CollectionCatalog((), "Everything")
    docs = Collection(name="docs", path="/srv/docs", contexts={"api": "API 日本"})
    store.put_collection(Collection(name="zeta", path="/srv/zeta"))
    store.put_collection(docs)
    expected = (Collection(name="zeta", path="/srv/zeta"), docs)
    assert store.read_catalog() == CollectionCatalog(expected, "Everything")
    store.set_global_context(None)
    assert store.read_catalog() == CollectionCatalog(expected, None)
    assert list(store.read_catalog().collections) == store.list_collections()


def test_delete_collection(store: StoreLike) -> None:
    store.put_collection(Collection(name="gone", path="/g"))
    store.put_collection(Collection(name="kept", path="/k"))
    put(store, "gone", "a.md", "only here")
    put(store, "gone", "b.md", "shared")
    put(store, "kept", "c.md", "shared")
    assert store.delete_collection("gone") == 2
    assert [c.name for c in store.list_collections()] == ["kept"]
    assert store.documents("gone") == []
    assert store.body(sha("shared")) == "shared"
    with pytest.raises(QmdError):
        store.body(sha("only here"))


def test_rename_collection(store: StoreLike) -> None:
    store.put_collection(Collection(name="old", path="/o", contexts={"": "ctx"}))
    store.put_collection(Collection(name="taken", path="/t"))
    put(store, "old", "a.md", "alpha")
    store.rename_collection("old", "new")
    assert store.get_collection("old") is None
    renamed = store.get_collection("new")
    assert renamed is not None and renamed.path == "/o" and dict(renamed.contexts) == {"": "ctx"}
    assert store.document_by_path("new", "a.md") is not None
    assert store.document_by_suffix("qmd://new/a.md") is not None
    with pytest.raises(QmdError) as info:
        store.rename_collection("new", "taken")
    assert info.value.code == CONFLICT


def test_cleanup_counts(store: StoreLike) -> None:
    put(store, "c", "keep.md", "keep")
    put(store, "c", "drop.md", "drop")
    store.put("k1", "v1")
    store.store_chunk_vectors(sha("drop"), [(0, 0, [1.0, 0.0])], "m", "fp", T0)
    store.deactivate_documents("c", ["drop.md"])
    result = store.cleanup()
    assert result == {
        "cache_entries": 1,
        "orphaned_vectors": 1,
        "inactive_documents": 1,
        "orphaned_content": 1,
    }
    assert store.get("k1") is None
    assert [m.path for m in store.documents()] == ["keep.md"]
    assert store.cleanup() == {
        "cache_entries": 0,
        "orphaned_vectors": 0,
        "inactive_documents": 0,
        "orphaned_content": 0,
    }


def _write(path: str, body: str, title: str = "T", when: str = T0) -> DocumentWrite:
    return DocumentWrite(path, title, sha(body), body, T0, when)


# two batches with every outcome: new rows, a body two documents share, then an unchanged
# document, a new title, a new body, an inactive row coming back and a path written twice
FIRST_BATCH = [
    _write("a.md", "alpha apples and pears"),
    _write("b.md", "bravo bananas"),
    _write("c.md", "alpha apples and pears", "Shared"),
    _write("d.md", "delta dates and apples"),
]
SECOND_BATCH = [
    _write("a.md", "alpha apples and pears", when=T1),
    _write("b.md", "bravo bananas", "Bravo", T1),
    _write("c.md", "charlie cherries and apples", "C", T1),
    _write("d.md", "delta dates again", "Back", T2),
    _write("e.md", "echo elderberries"),
    _write("a.md", "alpha apples, pears and plums", "A", T2),
]


def _written_row_by_row(store: StoreLike, collection: str, batch: list[DocumentWrite]) -> list[str]:
    with store.transaction():
        return [
            store.upsert_document(
                collection, d.path, d.title, d.content_hash, d.body, d.created_at, d.modified_at
            ).kind
            for d in batch
        ]


def _written_as_batch(store: StoreLike, collection: str, batch: list[DocumentWrite]) -> list[str]:
    with store.transaction():
        return [outcome.kind for outcome in store.upsert_documents(collection, batch)]


def test_a_batch_is_written_as_row_by_row(store: StoreLike) -> None:
    """REQ-INDEX-BATCH-001: `upsert_documents` gives the outcomes, rows, bodies and search
    ranking that `upsert_document` of each document in turn gives."""
    outcomes = {}
    first_ids = {}
    for collection, write in (("rows", _written_row_by_row), ("batch", _written_as_batch)):
        first = write(store, collection, FIRST_BATCH)
        first_ids[collection] = {d.path: d.id for d in store.documents(collection)}
        store.deactivate_documents(collection, ["d.md"])
        outcomes[collection] = first + write(store, collection, SECOND_BATCH)
    assert (
        outcomes["batch"]
        == outcomes["rows"]
        == [
            *["indexed"] * 4,
            *["unchanged", "updated", "updated", "indexed", "indexed", "updated"],
        ]
    )

    def rows(collection: str) -> list[tuple[object, ...]]:
        docs = store.documents(collection)
        return [
            (d.path, d.title, d.hash, d.created_at, d.modified_at, store.body(d.hash)) for d in docs
        ]

    assert rows("batch") == rows("rows") and len(rows("rows")) == 5
    # (rows come in id order: the batch numbered its new rows in its order) the rows written
    # again, the revived d.md included, keep their ids
    for c in ("rows", "batch"):
        ids = {d.path: d.id for d in store.documents(c)}
        assert {p: ids[p] for p in first_ids[c]} == first_ids[c]
    for text in ("apples", "alpha plums", "cherries", "dates", "bravo"):
        query = parse_lex_query(text)
        ranked = {
            c: [(h.document.meta.path, round(h.bm25, 9)) for h in store.search_lex(query, 10, c)]
            for c in ("rows", "batch")
        }
        assert ranked["batch"] == ranked["rows"] and ranked["rows"], text
