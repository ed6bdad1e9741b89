"""Reads racing an update: a document looked up, then edited (its old content deleted) or
removed and cleaned up before its body is read, is answered with its current version or as
not found, never with an internal 'Content not found' (found by tests/e2e/test_concurrency)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.sqlite.store import SqliteIndex
from domain.errors import DocumentNotFoundError
from domain.model import Collection, DocumentMeta
from domain.text import content_hash
from domain.usecases.retrieval import Retrieval
from tests.fakes import InMemoryStore

StoreLike = InMemoryStore | SqliteIndex
WHEN = "2025-01-01T00:00:00.000Z"


@pytest.fixture(params=["fake", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreLike]:
    if request.param == "fake":
        yield InMemoryStore()
        return
    index = SqliteIndex.open(tmp_path / "index.sqlite")
    try:
        yield index
    finally:
        index.close()


def put(store: StoreLike, path: str, body: str) -> None:
    store.upsert_document("c", path, path, content_hash(body), body, WHEN, WHEN)
    store.delete_orphan_content()


def seed(store: StoreLike) -> DocumentMeta:
    store.put_collection(Collection(name="c", path="/c"))
    put(store, "a.md", "# a\nfirst version\n")
    put(store, "b.md", "# b\nstays\n")
    meta = store.document_by_path("c", "a.md")
    assert meta is not None
    return meta


def test_fetch_follows_a_document_edited_since_its_lookup(store: StoreLike) -> None:
    stale = seed(store)
    put(store, "a.md", "# a\nsecond version\n")
    fetched = Retrieval(store).fetch(stale)
    assert fetched.body == "# a\nsecond version\n"
    assert fetched.meta.hash == content_hash("# a\nsecond version\n")


def test_fetch_of_a_document_removed_since_its_lookup_is_not_found(store: StoreLike) -> None:
    stale = seed(store)
    store.deactivate_documents("c", ["a.md"])
    store.cleanup()  # drops the inactive row and its content (until then the old body reads)
    with pytest.raises(DocumentNotFoundError):
        Retrieval(store).fetch(stale)


class RemovesAfterListing:
    """The store as a concurrent update leaves it: `a.md` is removed right after a listing."""

    def __init__(self, inner: StoreLike) -> None:
        self._inner = inner

    def documents(self, collection: str | None = None) -> list[DocumentMeta]:
        listed = self._inner.documents(collection)
        self._inner.deactivate_documents("c", ["a.md"])
        self._inner.cleanup()
        return listed

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_multi_get_leaves_out_a_document_removed_after_the_listing(store: StoreLike) -> None:
    seed(store)
    retrieval = Retrieval(RemovesAfterListing(store))  # type: ignore[arg-type]
    result = retrieval.multi_get("*.md", 10_000)
    assert [e.meta.path for e in result.entries] == ["b.md"]
    assert result.errors == ()
