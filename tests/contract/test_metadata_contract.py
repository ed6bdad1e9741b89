"""MetadataIndex contract, and the `within` candidate restriction of the lexical and vector
indexes (REQ-META-004, REQ-FILTER-003), for InMemoryStore and SqliteIndex alike."""

from __future__ import annotations

import hashlib

from domain.filters import MetaValue, matches, narrowing, parse_filter
from domain.lexquery import parse_lex_query
from domain.usecases.metadata import MetadataService
from tests.contract.conftest import StoreLike
from tests.fakes import InMemoryStore

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


def test_metadata_stored_together_as_in_turn(store: StoreLike) -> None:
    """REQ-INDEX-BATCH-001: `put_metadata_many` stores what `put_metadata` of each (path,
    metadata) in turn stores: a path given twice keeps its last, a path without an active
    document stores nothing, an unchanged value stays."""
    a = add(store, "c", "a.md", "alpha")
    b = add(store, "c", "b.md", "beta")
    store.put_metadata("c", "b.md", {"size": 2})
    store.put_metadata_many(
        "c",
        [
            ("a.md", {"tags": ("x",)}),
            ("nowhere.md", {"size": 1}),
            ("b.md", {"size": 2}),
            ("a.md", {"tags": ("y", "z"), "draft": True}),
        ],
    )
    assert store.metadata_by_id([a, b]) == {a: {"tags": ("y", "z"), "draft": True}, b: {"size": 2}}
    store.put_metadata_many("other", [("a.md", {"size": 9})])  # another collection's path
    store.put_metadata_many("c", [])
    assert store.metadata_by_id([a]) == {a: {"tags": ("y", "z"), "draft": True}}


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


def test_lexical_hits_carry_their_documents_metadata(store: StoreLike) -> None:
    """REQ-FILTER-006: a lexical hit brings its document's metadata (a document without any:
    {}), so a page of results is shown without reading it again; the every-term hits and the
    any-term fill alike, and read as `metadata_by_id` reads it."""
    tagged = add(store, "c", "tagged.md", "kumquat orchard notes")
    plain = add(store, "c", "plain.md", "kumquat market")
    other = add(store, "c", "other.md", "orchard only")
    store.put_metadata("c", "tagged.md", {"tags": ("fruit", "farm"), "year": 2024, "ok": True})
    stored = store.metadata_by_id([tagged])[tagged]
    hits = store.search_lex(parse_lex_query("kumquat"), 10, None)
    assert {h.document.meta.id: h.metadata for h in hits} == {tagged: stored, plain: {}}
    assert [h.metadata for h in store.search_lex(parse_lex_query("kumquat"), 5, "c")] == [
        h.metadata for h in hits
    ]
    every, fill = store.search_lex_filled(parse_lex_query("kumquat orchard"), 5, None)
    assert {h.document.meta.id: h.metadata for h in every} == {tagged: stored}
    assert {h.document.meta.id: h.metadata for h in fill} == {plain: {}, other: {}}
    store.put_metadata("c", "plain.md", {"author": "Ana"})  # changed: the next hit says so
    (hit,) = store.search_lex(parse_lex_query("market"), 5, None)
    assert hit.metadata == {"author": "Ana"}


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


FILTERS: tuple[object, ...] = (
    {"key": "tags", "operator": "eq", "value": "rare"},
    {"key": "tags", "operator": "all", "value": ["ops", "notes"]},
    {"key": "tags", "operator": "in", "value": ["rare", "zzz"]},
    {"key": "n", "operator": "eq", "value": 3},
    {"key": "n", "operator": "eq", "value": 3.0},
    {"key": "n", "operator": "eq", "value": "3"},  # a string never equals a number
    {"key": "flag", "operator": "eq", "value": True},
    {"key": "flag", "operator": "eq", "value": 1},  # true is not 1
    {"key": "n", "operator": "gte", "value": 40},
    {"key": "n", "operator": "ne", "value": 3},
    {"key": "tags", "operator": "nin", "value": ["rare"]},
    {"key": "empty", "operator": "exists", "value": True},
    {"key": "empty", "operator": "exists", "value": False},
    {"key": "big", "operator": "eq", "value": 2**60 + 1},
    {"operator": "not", "operand": {"key": "tags", "operator": "eq", "value": "rare"}},
    {
        "operator": "or",
        "operands": [
            {"key": "author", "operator": "eq", "value": "a3"},
            {"key": "n", "operator": "lt", "value": 2},
        ],
    },
    {
        "operator": "and",
        "operands": [
            {"key": "tags", "operator": "eq", "value": "rare"},
            {"operator": "not", "operand": {"key": "author", "operator": "eq", "value": "a0"}},
        ],
    },
    {
        "operator": "or",
        "operands": [
            {"key": "author", "operator": "eq", "value": "a1"},
            {"operator": "not", "operand": {"key": "n", "operator": "exists", "value": True}},
        ],
    },
)


def test_a_filter_admits_what_evaluating_every_document_admits(store: StoreLike) -> None:
    """REQ-FILTER-009: reading candidates through an index of the metadata changes nothing."""
    ids = []
    for i in range(120):
        ids.append(add(store, "c" if i % 5 else "d", f"n{i}.md", f"note {i}"))
        metadata: dict[str, MetaValue] = {
            "n": i if i % 4 else float(i),
            "author": f"a{i % 7}",
            "tags": ("rare",) if i % 9 == 0 else ("ops", "notes"),
            "flag": i % 2 == 0,
            "big": 2**60 + i,
        }
        if i % 3 == 0:
            metadata["empty"] = ()
        if i % 10 != 7:  # some documents carry no metadata at all
            store.put_metadata("c" if i % 5 else "d", f"n{i}.md", metadata)
    service = MetadataService(store)
    for raw in FILTERS:
        node = parse_filter(raw)
        for collections in (None, ["c"]):
            every = {i for i, meta in store.active_metadata(collections) if matches(node, meta)}
            assert service.scope(node, collections) == every, raw
    # the narrowed read really is narrower where the store keeps an index of the values
    rare = narrowing(parse_filter(FILTERS[0]))
    read = len(store.active_metadata(None, rare))
    tagged_rare = sum(1 for i in range(120) if i % 9 == 0 and i % 10 != 7)
    assert read == (len(ids) if isinstance(store, InMemoryStore) else tagged_rare)
