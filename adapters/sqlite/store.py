"""`SqliteIndex`: the original QMD index file behind the DocumentStore, IndexMaintenance,
LexicalIndex, VectorIndex, MetadataIndex and LlmCache ports.

The file layout, SQL and write rules follow QMD 2.8.3 (`src/store.ts`) so the original and this
adapter can read and write each other's index. The class is assembled from one part per concern,
each in its own module as on PostgreSQL: `lexical`, `metadata` and `vectors`; the documents,
their upkeep and the LLM cache stay here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from adapters.sqlite.driver import Connection, DatabaseError, OperationalError, connect
from adapters.sqlite.lexical import SqliteLexical
from adapters.sqlite.metadata import SqliteMetadata, delete_orphaned_metadata
from adapters.sqlite.schema import ensure_schema
from adapters.sqlite.vectors import PREFILTER_MIN_VECTORS, SqliteVectors
from adapters.storage.sql_documents import TIDY_SHARE, DocumentDialect, DocumentWrites, Writing
from adapters.storage.sql_rows import LLM_CACHE_KEEP, Catalog, escape_like
from adapters.storage.sql_rows import META_FROM as _META_FROM
from adapters.storage.sql_rows import meta_from_row as _meta
from adapters.storage.sql_rows import now_iso as _now_iso
from adapters.storage.sql_vectors import EMBEDDED_BY_MODEL, VECTOR_COUNT
from domain.errors import CONFLICT, QmdError
from domain.lexquery import space_cjk
from domain.model import DocumentMeta
from domain.ports import CollectionCount


class SqliteIndex(SqliteLexical, SqliteMetadata, SqliteVectors, Catalog, DocumentWrites):
    """One open index file. Every public method is a complete unit of work.

    Assembled from one part per concern on the file's one connection (`ConnectionPart`, listed
    before the shared `Catalog` so that its `_select` and `_write` run the shared statements):
    `lexical`, `metadata`, `vectors`; documents and the LLM cache stay here."""

    # the documents_au trigger drops a deactivated document's full-text row
    _DOCUMENTS = DocumentDialect(
        insert_content="INSERT OR IGNORE INTO content (hash, doc, created_at) VALUES (?, ?, ?)",
        returning_id=False,
        unindex=None,
    )

    def __init__(
        self, conn: Connection, prefilter_min_vectors: int = PREFILTER_MIN_VECTORS
    ) -> None:
        self._conn = conn
        self._prefilter_min_vectors = prefilter_min_vectors
        ensure_schema(conn, space_cjk)

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], env: Mapping[str, str] | None = None
    ) -> SqliteIndex:
        return cls(connect(path, env))

    # ------------------------------------------------------------------ plumbing

    @property
    def connection(self) -> Connection:
        return self._conn

    @property
    def path(self) -> str:
        return self._conn.path

    @property
    def vec_available(self) -> bool:
        return self._conn.vec_available

    @property
    def lexical_ranking(self) -> str:
        self._conn.load_rank_function()  # what a connection that ranks again would load
        if self._conn.rank_error is None:
            return (
                f"{self._conn.rank_function} from a connection's second search on "
                "(row lengths kept in memory)"
            )
        return f"FTS5 {self._conn.rank_function}: {self._conn.rank_error}"

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group many writes (e.g. a whole `update`) into one commit; calls nest."""
        with self._conn.transaction():
            yield

    def close(self) -> None:
        self._signs = None  # the process's copy goes when no open index holds it
        self._conn.close()

    def __enter__(self) -> SqliteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_fts(self, doc_id: int) -> None:
        """Replace the FTS row of one document with its CJK-normalised columns (active only)."""
        row = self._conn.raw.execute(
            "SELECT d.collection, d.path, d.title, content.doc FROM documents d "
            "JOIN content ON content.hash = d.hash WHERE d.id = ? AND d.active = 1",
            (doc_id,),
        ).fetchone()
        self._conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (doc_id,))
        if row is None:
            return
        collection, path, title, body = row
        self._conn.execute(
            "INSERT INTO documents_fts(rowid, filepath, title, body) VALUES (?, ?, ?, ?)",
            (doc_id, space_cjk(f"{collection}/{path}"), space_cjk(title), space_cjk(body)),
        )

    # ------------------------------------------------------------------ collections

    def delete_collection(self, name: str) -> int:
        """Hard-delete the collection's document rows, unpinned content and its config row.

        Returns the number of document rows deleted (the original's `deletedDocs`).
        """
        with self._conn.transaction():
            deleted = self._conn.execute(
                "DELETE FROM documents WHERE collection = ?", (name,)
            ).rowcount
            self._conn.execute(
                "DELETE FROM content WHERE hash NOT IN "
                "(SELECT DISTINCT hash FROM documents WHERE active = 1)"
            )
            self._conn.execute("DELETE FROM store_collections WHERE name = ?", (name,))
            delete_orphaned_metadata(self._conn)
        return int(deleted)

    def rename_collection(self, old: str, new: str) -> None:
        with self._conn.transaction():
            if old != new and self._conn.scalar(
                "SELECT name FROM store_collections WHERE name = ?", (new,)
            ):
                raise QmdError(CONFLICT, f"Collection '{new}' already exists")
            self._conn.execute(
                "UPDATE documents SET collection = ? WHERE collection = ?", (new, old)
            )
            self._conn.execute("UPDATE store_collections SET name = ? WHERE name = ?", (new, old))
            for (doc_id,) in self._conn.query(
                "SELECT id FROM documents WHERE collection = ? AND active = 1", (new,)
            ):
                self._write_fts(int(doc_id))

    # ------------------------------------------------------------------ indexing

    def active_documents(self, collection: str) -> dict[str, DocumentMeta]:
        # no LENGTH(content.doc): it reads every body, most of a no-op update's time
        rows = self._conn.query(
            "SELECT d.id, d.collection, d.path, d.title, d.hash, d.created_at, d.modified_at, 0 "
            f"{_META_FROM} WHERE d.collection = ? AND d.active = 1 ORDER BY d.id",
            (collection,),
        )
        return {str(r[2]): _meta(r) for r in rows}

    @contextmanager
    def _writing(self) -> Iterator[Writing]:
        with self._conn.transaction():
            yield self._conn, self._write_fts

    def tidy_lexical_index(self, documents_written: int) -> None:
        """Merge FTS5's segments into one when the run wrote at least 1/`TIDY_SHARE` of the
        index (REQ-INDEX-FTS-TIDY-001). FTS5 adds a segment for every flush of its write
        buffer, and every MATCH looks each term up in every segment: a 5,000-document index
        built in one run held 14 segments, and one segment made its searches' statements 2 to
        3 times faster. Small runs are left to FTS5's own merging (a few small segments): a
        full merge rewrites the whole index (about 0.1 s per 5,000 documents)."""
        if documents_written <= 0:
            return
        if documents_written * TIDY_SHARE < self.total_documents():
            return
        try:
            self._conn.execute("INSERT INTO documents_fts(documents_fts) VALUES('optimize')")
        except DatabaseError as exc:
            if "no such table" not in str(exc).lower():
                raise

    def delete_orphan_content(self) -> int:
        cursor = self._conn.execute(
            "DELETE FROM content WHERE hash NOT IN (SELECT DISTINCT hash FROM documents)"
        )
        return int(cursor.rowcount)

    # ------------------------------------------------------------------ lookups

    def document_by_docid(self, prefix: str) -> DocumentMeta | None:
        if not prefix:
            return None
        return self._one("d.hash LIKE ? ESCAPE '#'", (escape_like(prefix) + "%",))

    def document_by_suffix(self, suffix: str) -> DocumentMeta | None:
        """Unanchored, ASCII-case-insensitive `qmd://c/p LIKE '%suffix'` (the original's quirk)."""
        return self._one(
            "'qmd://' || d.collection || '/' || d.path LIKE ? ESCAPE '#'",
            ("%" + escape_like(suffix),),
        )

    # ------------------------------------------------------------------ status and upkeep

    def collection_counts(self) -> list[CollectionCount]:
        rows = self._conn.query(
            "SELECT collection, COUNT(*), MAX(modified_at) FROM documents WHERE active = 1 "
            "GROUP BY collection"
        )
        return [CollectionCount(str(r[0]), int(r[1]), str(r[2] or "")) for r in rows]

    def vector_count(self) -> int:
        """Stored chunk vectors of active documents (orphans of removed ones not counted)."""
        return int(self._conn.scalar(VECTOR_COUNT) or 0)

    def embedded_by_model(self) -> dict[str, int]:
        rows = self._conn.query(EMBEDDED_BY_MODEL)
        return {str(model): int(count) for model, count in rows}

    def cleanup(self) -> dict[str, int]:
        """`qmd cleanup`: llm_cache, orphaned vectors, inactive rows, orphan content, optimize,
        VACUUM. Keys: cache_entries, orphaned_vectors, inactive_documents, orphaned_content."""
        cache = int(self._conn.execute("DELETE FROM llm_cache").rowcount)
        vectors = self._cleanup_orphaned_vectors()
        inactive = int(self._conn.execute("DELETE FROM documents WHERE active = 0").rowcount)
        delete_orphaned_metadata(self._conn)
        orphaned = self.delete_orphan_content()
        try:
            self._conn.execute("INSERT INTO documents_fts(documents_fts) VALUES('optimize')")
        except DatabaseError as exc:
            if "no such table" not in str(exc).lower():
                raise
        self._conn.execute("VACUUM")
        return {
            "cache_entries": cache,
            "orphaned_vectors": vectors,
            "inactive_documents": inactive,
            "orphaned_content": orphaned,
        }

    # ------------------------------------------------------------------ llm cache

    def get(self, key: str) -> str | None:
        value = self._conn.scalar("SELECT result FROM llm_cache WHERE hash = ?", (key,))
        return None if value is None else str(value)

    def put(self, key: str, value: str) -> None:
        """Best effort: an entry that cannot be written now (another process, e.g. a long
        `qmd update`, holds the write lock past the busy timeout; a full disk) is not cached.
        A search must not fail because its cache could not be filled."""
        try:
            self._conn.execute(
                "INSERT OR REPLACE INTO llm_cache (hash, result, created_at) VALUES (?, ?, ?)",
                (key, value, _now_iso()),
            )
            import random

            if random.random() < 0.01:
                self._conn.execute(
                    "DELETE FROM llm_cache WHERE hash NOT IN (SELECT hash FROM llm_cache "
                    f"ORDER BY created_at DESC LIMIT {LLM_CACHE_KEEP})"
                )
        except OperationalError:
            if self._conn.in_transaction:
                raise  # part of a larger unit of work: its owner decides

    def clear(self) -> None:
        self._conn.execute("DELETE FROM llm_cache")


if TYPE_CHECKING:  # structural conformance, checked by mypy
    from domain.ports import DocumentStore, LexicalIndex, LlmCache, MetadataIndex, VectorIndex

    def _conforms(index: SqliteIndex) -> None:
        _store: DocumentStore = index
        _lex: LexicalIndex = index
        _metadata: MetadataIndex = index
        _vec: VectorIndex = index
        _cache: LlmCache = index
