"""The one scope policy: which folders a process may read and write, decided once by the
composition root and handed to every part that touches a file (docs/spec/security.md,
REQ-SEC-SCOPE-*).

Three inputs make it: the `--force-root DIR` root (None: no root), the collections an
unapproved project-local `.qmd/index.yml` names outside its project (trust: never indexed,
also not by `--watch`), and, derived from both, the allow-list of collections, decided afresh
on every call because the index and its configuration may change while a server runs.

Seed 001 INV-1 asks for a fail-closed boundary. It is enforced by decorating the storage ports
the use cases read: a collection exists for the server only when its folder, canonicalised
(`~` expanded and relative paths resolved when the config was mirrored, by the rule the trust
gate uses too: `collection_folder`, REQ-CFG-SYNC-001; symlinks resolved now), lies inside
DIR. Everything else — documents, docids, `qmd://` URIs, suffix matches, glob listings, search
hits, status rows, chunk rows and counts, extraction states, memory records, session
transcripts — comes only from inside, so an outside thing is indistinguishable from one that
does not exist. An empty allow-list allows nothing.

The scanner never follows links and skips files whose real path leaves their collection
(`FileSystemSource`), so a document of an allowed collection was inside DIR when it was indexed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from domain.errors import OUT_OF_ROOT, QmdError
from domain.lexfill import FilledHits, merge_filled
from domain.lexquery import LexQuery
from domain.model import Collection, CollectionCatalog, DocumentMeta, LexHit, VectorHit
from domain.ports import (
    CollectionCount,
    DocumentStore,
    DocumentWrite,
    LexicalIndex,
    MemoryRows,
    UpsertOutcome,
    VectorIndex,
)

if TYPE_CHECKING:  # a type only: the memory rows are not needed to scope
    from domain.ports import MemoryRows


def is_inside(root: str, path: str) -> bool:
    """`path` is `root` or below it (both already canonical)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class ScopePolicy:
    """Root, trust and allow-list in one object, built once per process (`scope_policy` in the
    composition root). Without a root and with nothing withheld it allows everything."""

    def __init__(
        self,
        root: str | None = None,
        withheld: Iterable[str] = (),
        home: str | None = None,
    ) -> None:
        self.root = os.path.realpath(root) if root else None
        # collections an unapproved local config names outside its project (trust)
        self.withheld = frozenset(withheld)
        self.home = home

    def contains_path(self, path: str) -> bool:
        """An absolute filesystem path, resolved through symlinks, lies inside the root (any
        path does when there is no root)."""
        if self.root is None:
            return True
        return os.path.isabs(path) and is_inside(self.root, os.path.realpath(path))

    def allows(self, collection: Collection) -> bool:
        """May this collection be indexed, watched and served? Not when trust withholds it,
        nor, under a root, when its folder is not inside (a relative or empty folder has no
        canonical place: fail closed)."""
        if collection.name in self.withheld:
            return False
        return self.root is None or (bool(collection.path) and self.contains_path(collection.path))

    def require_inside(self, setting: str, path: str) -> None:
        """A folder a surface writes into must lie inside the root: `out-of-root` naming the
        setting that chose it, before anything is read or written (REQ-SEC-SCOPE-003)."""
        if self.root is None or self.contains_path(os.path.abspath(path)):
            return
        raise QmdError(
            OUT_OF_ROOT,
            f"{setting}: {path} lies outside --force-root {self.root}; "
            f"set {setting} to a folder inside it",
        )

    def check_reference(self, reference: str) -> None:
        """Raise `out-of-root` for a filesystem-path reference (absolute, or `~`) that
        resolves outside the root. Decided on the string and the root alone, so the refusal
        is the same whether or not anything exists there (seed 001: the request path must
        canonicalize inside DIR)."""
        if self.root is None:
            return
        from domain.paths import parse_line_ref  # under a root only: a cold start skips it

        target = parse_line_ref(reference).target.strip()
        if self.home and (target == "~" or target.startswith("~/")):
            target = self.home + target[1:]
        if not os.path.isabs(target):
            return
        # Lexically outside is refused before any symlink is followed, so the answer never
        # depends on what exists outside the root.
        if not is_inside(self.root, os.path.normpath(target)) or not is_inside(
            self.root, os.path.realpath(target)
        ):
            raise QmdError(OUT_OF_ROOT, f"Outside the permitted root: {reference}")


class RootScope:
    """Which collections the policy allows, decided afresh on every call (the index and its
    configuration may change while a server runs)."""

    def __init__(self, root: str | ScopePolicy, store: DocumentStore) -> None:
        self.policy = root if isinstance(root, ScopePolicy) else ScopePolicy(root)
        self._store = store

    @property
    def root(self) -> str | None:
        return self.policy.root

    def contains_path(self, path: str) -> bool:
        return self.policy.contains_path(path)

    def allows(self, collection: Collection) -> bool:
        # a collection without a folder is allowed only when there is no root at all
        return self.policy.allows(collection)

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

    def upsert_documents(
        self, collection: str, documents: Sequence[DocumentWrite]
    ) -> list[UpsertOutcome]:
        return self._inner.upsert_documents(collection, documents)

    def deactivate_documents(self, collection: str, paths: Sequence[str]) -> int:
        return self._inner.deactivate_documents(collection, paths)

    def delete_orphan_content(self) -> int:
        return self._inner.delete_orphan_content()

    def tidy_lexical_index(self, documents_written: int) -> None:
        self._inner.tidy_lexical_index(documents_written)

    def body(self, content_hash: str) -> str:
        # Bodies are reached only through metadata this store has already let through.
        return self._inner.body(content_hash)

    def cleanup(self) -> dict[str, int]:
        return self._inner.cleanup()

    # -- reads are scoped ----------------------------------------------------------------------

    def list_collections(self) -> list[Collection]:
        return self._scope.collections()

    def read_catalog(self) -> CollectionCatalog:
        read = self._inner.read_catalog()
        shown = tuple(c for c in read.collections if self._scope.allows(c))
        return CollectionCatalog(shown, read.global_context)

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

    def search_lex_filled(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> FilledHits:
        """Each allowed collection's every-term and fill hits, merged (domain.lexfill)."""
        return merge_filled(
            [
                self._inner.search_lex_filled(query, limit, name, within)
                for name in _scopes(collection, self._scope)
            ],
            limit,
        )


class RootScopedVectorIndex:
    def __init__(self, inner: VectorIndex, store: RootScopedStore, scope: RootScope) -> None:
        self._inner = inner
        self._store = store
        self._scope = scope

    def has_vector_index(self) -> bool:
        return self._inner.has_vector_index()

    def stored_vector_models(self) -> list[str]:
        # the names only decide which vectors are current (REQ-VEC-MODEL-001); no document
        return self._inner.stored_vector_models()

    def pending_hashes(
        self, model: str, fingerprint: str, *, also: Sequence[tuple[str, str]] = ()
    ) -> list[str]:
        # Only the backlog of inside documents: `status` must not count outside ones.
        inside = {meta.hash for meta in self._store.documents()}
        pending = self._inner.pending_hashes(model, fingerprint, also=also)
        return [h for h in pending if h in inside]

    def pending_count(
        self, model: str, fingerprint: str, *, also: Sequence[tuple[str, str]] = ()
    ) -> int:
        return len(self.pending_hashes(model, fingerprint, also=also))

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


class FolderScopedMemoryRows:
    """Seed 004's memory rows as seen from one memory folder: a record exists only while its
    file lies in that folder, a topic only while a visible record names it. The rows are per
    index, so records another server stored from another folder (outside the root) are
    absent here, and never deleted by this server's repair (REQ-SEC-SCOPE-004)."""

    def __init__(self, inner: MemoryRows, folder: str) -> None:
        from pathlib import Path  # the memory surface only

        self._inner = inner
        self._folder = Path(folder)

    def _visible_files(self) -> list[tuple[str, str, str, bytes]]:
        return [
            row
            for row in self._inner.memory_files()
            if row[1] and ".." not in row[1].split("/") and (self._folder / row[1]).is_file()
        ]

    def _visible_ids(self) -> set[str]:
        return {row[0] for row in self._visible_files()}

    def memory_topics(self) -> list[tuple[str, bytes]]:
        visible = self._visible_ids()
        records = (json.loads(raw) for raw, _vector in self._inner.memory_records(None, None))
        named = {record["topic"] for record in records if record["id"] in visible}
        return [(name, vector) for name, vector in self._inner.memory_topics() if name in named]

    def put_memory_topic(self, name: str, vector: bytes) -> None:
        self._inner.put_memory_topic(name, vector)

    def memory_record(self, record_id: str) -> tuple[str, bytes] | None:
        return self._inner.memory_record(record_id) if record_id in self._visible_ids() else None

    def memory_records(self, topic: str | None, kind: str | None) -> list[tuple[str, bytes]]:
        visible = self._visible_ids()
        return [
            (raw, vector)
            for raw, vector in self._inner.memory_records(topic, kind)
            if json.loads(raw)["id"] in visible
        ]

    def memory_path(self, record_id: str) -> str | None:
        return self._inner.memory_path(record_id) if record_id in self._visible_ids() else None

    def memory_files(self) -> list[tuple[str, str, str, bytes]]:
        return self._visible_files()

    def put_memory_records(
        self, rows: Sequence[tuple[str, str, str, str, str, str, bytes]]
    ) -> None:
        self._inner.put_memory_records(rows)

    def sync_memory_records(
        self,
        gone: Sequence[str],
        paths: Mapping[str, str],
        refreshed: Sequence[tuple[str, str, str]],
    ) -> None:
        self._inner.sync_memory_records(gone, paths, refreshed)
