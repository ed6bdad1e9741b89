"""`--force-root DIR`: the index as seen from inside DIR, below every surface and transport.

Seed 001 INV-1 asks for a fail-closed boundary. It is enforced here, once, by decorating the
storage ports the use cases read: a collection exists for the server only when its folder,
canonicalised (`~` expanded and relative paths taken against `index.yml`'s folder when the
config was mirrored, symlinks resolved now), lies inside DIR. Everything else — documents,
docids, `qmd://` URIs, suffix matches, glob listings, search hits, status rows, suggestions —
comes only from those collections, so an outside document is indistinguishable from one that
does not exist. An empty allow-list allows nothing.

The scanner never follows links and skips files whose real path leaves their collection
(`FileSystemSource`), so a document of an allowed collection was inside DIR when it was indexed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager

from domain.lexquery import LexQuery
from domain.model import Collection, DocumentMeta, LexHit, VectorHit
from domain.ports import CollectionCount, DocumentStore, LexicalIndex, UpsertOutcome, VectorIndex


def is_inside(root: str, path: str) -> bool:
    """`path` is `root` or below it (both already canonical)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class RootScope:
    """Which collections lie inside the root, decided afresh on every call (the index and its
    configuration may change while a server runs)."""

    def __init__(self, root: str, store: DocumentStore) -> None:
        self.root = os.path.realpath(root)
        self._store = store

    def contains_path(self, path: str) -> bool:
        """An absolute filesystem path, resolved through symlinks, lies inside the root."""
        return os.path.isabs(path) and is_inside(self.root, os.path.realpath(path))

    def allows(self, collection: Collection) -> bool:
        # A relative or empty folder has no canonical place: fail closed.
        return bool(collection.path) and self.contains_path(collection.path)

    def collections(self) -> list[Collection]:
        return [c for c in self._store.list_collections() if self.allows(c)]

    def names(self) -> set[str]:
        return {c.name for c in self.collections()}


class RootScopedStore:
    """`DocumentStore` that shows only the collections a `RootScope` allows."""

    def __init__(self, inner: DocumentStore, scope: RootScope) -> None:
        self._inner = inner
        self._scope = scope

    def _visible(self, meta: DocumentMeta) -> bool:
        return meta.collection in self._scope.names()

    # -- writes and unscoped data pass through -------------------------------------------------

    def transaction(self) -> AbstractContextManager[None]:
        return self._inner.transaction()

    def put_collection(self, collection: Collection) -> None:
        self._inner.put_collection(collection)

    def delete_collection(self, name: str) -> int:
        return self._inner.delete_collection(name)

    def rename_collection(self, old: str, new: str) -> None:
        self._inner.rename_collection(old, new)

    def get_global_context(self) -> str | None:
        return self._inner.get_global_context()

    def set_global_context(self, text: str | None) -> None:
        self._inner.set_global_context(text)

    def upsert_document(
        self,
        collection: str,
        path: str,
        title: str,
        content_hash: str,
        body: str,
        created_at: str,
        modified_at: str,
    ) -> UpsertOutcome:
        return self._inner.upsert_document(
            collection, path, title, content_hash, body, created_at, modified_at
        )

    def deactivate_documents(self, collection: str, paths: Sequence[str]) -> int:
        return self._inner.deactivate_documents(collection, paths)

    def delete_orphan_content(self) -> int:
        return self._inner.delete_orphan_content()

    def body(self, content_hash: str) -> str:
        # Bodies are reached only through metadata this store has already let through.
        return self._inner.body(content_hash)

    def cleanup(self) -> dict[str, int]:
        return self._inner.cleanup()

    # -- reads are scoped ----------------------------------------------------------------------

    def list_collections(self) -> list[Collection]:
        return self._scope.collections()

    def get_collection(self, name: str) -> Collection | None:
        collection = self._inner.get_collection(name)
        return collection if collection is not None and self._scope.allows(collection) else None

    def active_documents(self, collection: str) -> dict[str, DocumentMeta]:
        if collection not in self._scope.names():
            return {}
        return self._inner.active_documents(collection)

    def document_by_docid(self, prefix: str) -> DocumentMeta | None:
        found = self._inner.document_by_docid(prefix)
        if found is None or self._visible(found):
            return found
        # The first match lies outside; an inside document may share the prefix.
        wanted = prefix.lower()
        return next((m for m in self.documents() if m.hash.lower().startswith(wanted)), None)

    def document_by_path(self, collection: str, path: str) -> DocumentMeta | None:
        if collection not in self._scope.names():
            return None
        return self._inner.document_by_path(collection, path)

    def document_by_suffix(self, suffix: str) -> DocumentMeta | None:
        found = self._inner.document_by_suffix(suffix)
        if found is None or self._visible(found):
            return found
        wanted = suffix.lower()
        return next((m for m in self.documents() if m.virtual_path.lower().endswith(wanted)), None)

    def documents(self, collection: str | None = None) -> list[DocumentMeta]:
        names = self._scope.names()
        if collection is not None:
            return self._inner.documents(collection) if collection in names else []
        return [m for m in self._inner.documents() if m.collection in names]

    def document_paths(self) -> list[tuple[str, str]]:
        names = self._scope.names()
        return [pair for pair in self._inner.document_paths() if pair[0] in names]

    def collection_counts(self) -> list[CollectionCount]:
        names = self._scope.names()
        return [c for c in self._inner.collection_counts() if c.name in names]


def _scopes(collection: str | None, scope: RootScope) -> Iterator[str]:
    """The collections one index call may touch: the named one if allowed, else every allowed
    one; `None` never means "all" here."""
    names = scope.names()
    if collection is None:
        yield from sorted(names)
    elif collection in names:
        yield collection


class RootScopedLexicalIndex:
    def __init__(self, inner: LexicalIndex, scope: RootScope) -> None:
        self._inner = inner
        self._scope = scope

    def search_lex(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[LexHit]:
        hits = [
            hit
            for name in _scopes(collection, self._scope)
            for hit in self._inner.search_lex(query, limit, name, within)
        ]
        return sorted(hits, key=lambda hit: hit.bm25)[:limit]


class RootScopedVectorIndex:
    def __init__(self, inner: VectorIndex, store: RootScopedStore, scope: RootScope) -> None:
        self._inner = inner
        self._store = store
        self._scope = scope

    def has_vector_index(self) -> bool:
        return self._inner.has_vector_index()

    def pending_hashes(self, model: str, fingerprint: str) -> list[str]:
        # Only the backlog of inside documents: `status` must not count outside ones.
        inside = {meta.hash for meta in self._store.documents()}
        return [h for h in self._inner.pending_hashes(model, fingerprint) if h in inside]

    def pending_count(self, model: str, fingerprint: str) -> int:
        return len(self.pending_hashes(model, fingerprint))

    def store_chunk_vectors(
        self,
        content_hash: str,
        chunks: Sequence[tuple[int, int, Sequence[float]]],
        model: str,
        fingerprint: str,
        embedded_at: str,
    ) -> None:
        self._inner.store_chunk_vectors(content_hash, chunks, model, fingerprint, embedded_at)

    def clear_vectors(self) -> None:
        self._inner.clear_vectors()

    def search_vectors(
        self,
        vector: Sequence[float],
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[VectorHit]:
        hits = [
            hit
            for name in _scopes(collection, self._scope)
            for hit in self._inner.search_vectors(vector, limit, name, within)
        ]
        return sorted(hits, key=lambda hit: hit.distance)[:limit]
