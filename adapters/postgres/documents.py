"""Collections, documents, their bodies and the index's upkeep on PostgreSQL (the
DocumentStore and IndexMaintenance ports), as `adapters.sqlite.store` on SQLite."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from adapters.postgres.batch import unique_runs, upsert_batch
from adapters.postgres.connection import PgConnections, pyformat
from adapters.postgres.fts import fts_params, fts_row_sql
from adapters.postgres.tsvector import Lexemes
from adapters.storage.sql_documents import TIDY_SHARE, DocumentDialect, DocumentWrites, Writing
from adapters.storage.sql_rows import META_COLUMNS as _META_COLUMNS
from adapters.storage.sql_rows import META_FROM as _META_FROM
from adapters.storage.sql_rows import ORPHAN_VECTOR_COUNT as _ORPHAN_VECTOR_COUNT
from adapters.storage.sql_rows import Catalog, escape_like
from adapters.storage.sql_rows import meta_from_row as _meta
from adapters.storage.sql_vectors import EMBEDDED_BY_MODEL, VECTOR_COUNT
from domain.errors import CONFLICT, QmdError
from domain.model import DocumentMeta
from domain.ports import CollectionCount, DocumentWrite, UpsertOutcome

# SQLite's LIKE folds ASCII letters only; PostgreSQL's lower() would fold every script.
_ASCII_LOWER = "translate({}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"


def _ascii_lower(text: str) -> str:
    return "".join(ch.lower() if ch.isascii() else ch for ch in text)


class Qmark:
    """A connection running the stores' shared `?` statements (adapters/storage/sql_*.py)."""

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        self._conn = conn

    def execute(
        self, statement: str, params: Sequence[Any] = ()
    ) -> psycopg.Cursor[tuple[Any, ...]]:
        return self._conn.execute(pyformat(statement), params)


# the tables a batch's statements join against (adapters/postgres/batch.py), and the fewest
# documents a run writes before their statistics are refreshed
_PLANNED_TABLES = ("documents", "content", "documents_fts", "fts_lexemes")
_ANALYZE_MIN_ROWS = 2000


class PgDocuments(Catalog, DocumentWrites, PgConnections):
    """DocumentStore and IndexMaintenance over the pool."""

    # no trigger keeps documents_fts: a deactivated document's row is deleted here
    _DOCUMENTS = DocumentDialect(
        insert_content="INSERT INTO content (hash, doc, created_at) VALUES (?, ?, ?) "
        "ON CONFLICT (hash) DO NOTHING",
        returning_id=True,
        unindex="DELETE FROM documents_fts WHERE id = "
        "(SELECT id FROM documents WHERE collection = ? AND path = ?)",
    )

    _INSERTION_ORDER = "ord"
    _temp_allowed: bool | None = None  # asked on the first batch
    _known_lexemes: Lexemes | None = None  # an indexing run's words (tsvector.py)
    # documents in the index when the planner's statistics were last refreshed by this run,
    # and written by the run since (None: no batch yet in this run)
    _rows_analyzed: int | None = None
    _rows_since: int = 0

    @property
    def _lexemes(self) -> Lexemes:
        """The words this index's batches met, and their lexemes (postgres/tsvector.py)."""
        known = self._known_lexemes
        if known is None:
            known = self._known_lexemes = Lexemes()
        return known

    def _select(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._query(pyformat(statement), params)

    def _write(self, statement: str, params: Sequence[Any] = ()) -> None:
        self._execute(pyformat(statement), params)

    def _write_fts(self, conn: psycopg.Connection[tuple[Any, ...]], doc_id: int) -> None:
        row = conn.execute(
            "SELECT d.collection, d.path, d.title, content.doc FROM documents d "
            "JOIN content ON content.hash = d.hash WHERE d.id = %s AND d.active = 1",
            (doc_id,),
        ).fetchone()
        if row is None:
            conn.execute("DELETE FROM documents_fts WHERE id = %s", (doc_id,))
            return
        conn.execute(fts_row_sql(), fts_params(doc_id, *row))

    def delete_collection(self, name: str) -> int:
        with self.transaction(), self._conn() as conn:
            deleted = conn.execute("DELETE FROM documents WHERE collection = %s", (name,)).rowcount
            conn.execute(
                "DELETE FROM content WHERE hash NOT IN "
                "(SELECT DISTINCT hash FROM documents WHERE active = 1)"
            )
            conn.execute("DELETE FROM store_collections WHERE name = %s", (name,))
        return int(deleted)

    def rename_collection(self, old: str, new: str) -> None:
        with self.transaction(), self._conn() as conn:
            if (
                old != new
                and conn.execute(
                    "SELECT 1 FROM store_collections WHERE name = %s", (new,)
                ).fetchone()
            ):
                raise QmdError(CONFLICT, f"Collection '{new}' already exists")
            conn.execute("UPDATE documents SET collection = %s WHERE collection = %s", (new, old))
            conn.execute("UPDATE store_collections SET name = %s WHERE name = %s", (new, old))
            ids = conn.execute(
                "SELECT id FROM documents WHERE collection = %s AND active = 1", (new,)
            ).fetchall()
            for (doc_id,) in ids:
                self._write_fts(conn, int(doc_id))

    def active_documents(self, collection: str) -> dict[str, DocumentMeta]:
        rows = self._query(
            f"SELECT {_META_COLUMNS} {_META_FROM} WHERE d.collection = %s AND d.active = 1 "
            "ORDER BY d.id",
            (collection,),
        )
        return {str(r[2]): _meta(r) for r in rows}

    @contextmanager
    def _writing(self) -> Iterator[Writing]:
        with self.transaction(), self._conn() as conn:
            yield Qmark(conn), lambda doc_id: self._write_fts(conn, doc_id)

    def upsert_documents(
        self, collection: str, documents: Sequence[DocumentWrite]
    ) -> list[UpsertOutcome]:
        """The batch written set-based: one COPY and a fixed number of statements, the
        lexemes folded once (adapters/postgres/batch.py, REQ-INDEX-BATCH-001)."""
        outcomes: list[UpsertOutcome] = []
        with self.transaction(), self._conn() as conn:
            if not self._may_stage(conn):
                return super().upsert_documents(collection, documents)
            self._refresh_statistics(conn)
            for run in unique_runs(documents):
                outcomes += upsert_batch(conn, collection, run, self._lexemes)
            # only what was written moves the statistics: a no-op update analyses nothing
            self._rows_since += sum(o.kind != "unchanged" for o in outcomes)
        return outcomes

    def _refresh_statistics(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        """Analyse the tables a batch joins against once the run has doubled them since
        their statistics were taken. A run that fills an empty index otherwise plans every
        batch from the empty tables' figures, and each batch costs more than the one before
        (0.25 s to 1.0 s a batch over the first 40,000 documents) until autovacuum happens
        to analyse them; doubling keeps it to a handful of ANALYZEs a run (issue 36)."""
        if self._rows_analyzed is None:
            row = conn.execute(
                "SELECT greatest(reltuples, 0)::bigint FROM pg_class "
                "WHERE oid = 'documents'::regclass"
            ).fetchone()
            self._rows_analyzed = int(row[0]) if row else 0
        if self._rows_since < max(_ANALYZE_MIN_ROWS, self._rows_analyzed):
            return
        for table in _PLANNED_TABLES:
            conn.execute(f"ANALYZE {table}")
        self._rows_analyzed += self._rows_since
        self._rows_since = 0

    def _may_stage(self, conn: psycopg.Connection[tuple[Any, ...]]) -> bool:
        """Whether this role may create the batch's temporary table (every role may unless an
        administrator revoked TEMP on the database): without it, batches go row by row."""
        if self._temp_allowed is None:
            row = conn.execute(
                "SELECT has_database_privilege(current_database(), 'TEMP')"
            ).fetchone()
            self._temp_allowed = bool(row and row[0])
        return self._temp_allowed

    def tidy_lexical_index(self, documents_written: int) -> None:
        """Fold the GIN index's pending list in after any run that wrote, and refresh the
        planner's statistics of the documents and their tsvectors after one that wrote at
        least 1/`TIDY_SHARE` of the index (REQ-INDEX-FTS-TIDY-002). GIN queues new entries in
        a list every search reads in full until autovacuum folds it: 3,000 new documents left
        486 pages there, and a two-word search read them all (1.4 ms, 0.03 ms once folded).
        Without statistics the planner guessed: it scanned every row for a prefix word, and
        every document of a collection it took for one document."""
        self._known_lexemes = None  # the run's words, remembered no longer than the run
        self._rows_analyzed, self._rows_since = None, 0
        if documents_written <= 0:
            return
        large = documents_written * TIDY_SHARE >= self.total_documents()
        with self._conn() as conn:
            try:
                with conn.transaction():  # a savepoint: a refusal leaves the run's writes
                    conn.execute("SELECT gin_clean_pending_list('idx_documents_fts'::regclass)")
                    if large:
                        conn.execute("ANALYZE documents, documents_fts")
            except psycopg.errors.InsufficientPrivilege:
                pass  # only the tables' owner may; autovacuum still will

    def delete_orphan_content(self) -> int:
        return self._execute(
            "DELETE FROM content WHERE hash NOT IN (SELECT DISTINCT hash FROM documents)"
        )

    def document_by_docid(self, prefix: str) -> DocumentMeta | None:
        if not prefix:
            return None
        return self._one(
            f"{_ASCII_LOWER.format('d.hash')} LIKE ? ESCAPE '#'",
            (escape_like(_ascii_lower(prefix)) + "%",),
        )

    def document_by_suffix(self, suffix: str) -> DocumentMeta | None:
        """`qmd://c/p` ending with `suffix`, ASCII-case-insensitively (SQLite's LIKE)."""
        return self._one(
            _ASCII_LOWER.format("'qmd://' || d.collection || '/' || d.path") + " LIKE ? ESCAPE '#'",
            ("%" + escape_like(_ascii_lower(suffix)),),
        )

    def collection_counts(self) -> list[CollectionCount]:
        rows = self._query(
            "SELECT collection, COUNT(*), MAX(modified_at) FROM documents WHERE active = 1 "
            'GROUP BY collection ORDER BY collection COLLATE "C"'
        )
        return [CollectionCount(str(r[0]), int(r[1]), str(r[2] or "")) for r in rows]

    def vector_count(self) -> int:
        return int(self._scalar(VECTOR_COUNT) or 0)

    def embedded_by_model(self) -> dict[str, int]:
        rows = self._query(EMBEDDED_BY_MODEL)
        return {str(model): int(count) for model, count in rows}

    def cleanup(self) -> dict[str, int]:
        with self.transaction(), self._conn() as conn:
            cache = conn.execute("DELETE FROM llm_cache").rowcount
            vectors = int(conn.execute(_ORPHAN_VECTOR_COUNT).fetchone()[0])  # type: ignore[index]
            if vectors and self.has_vector_index():
                conn.execute(
                    "DELETE FROM vectors_vec v WHERE NOT EXISTS ("
                    "SELECT 1 FROM documents d WHERE d.hash = v.hash AND d.active = 1)"
                )
            conn.execute(
                "DELETE FROM content_vectors WHERE hash NOT IN "
                "(SELECT hash FROM documents WHERE active = 1)"
            )
            inactive = conn.execute("DELETE FROM documents WHERE active = 0").rowcount
            orphaned = conn.execute(
                "DELETE FROM content WHERE hash NOT IN (SELECT DISTINCT hash FROM documents)"
            ).rowcount
        self._vacuum()
        return {
            "cache_entries": int(cache),
            "orphaned_vectors": vectors,
            "inactive_documents": int(inactive),
            "orphaned_content": int(orphaned),
        }

    def _vacuum(self) -> None:
        """`qmd cleanup`'s compaction: VACUUM (ANALYZE) the index's tables (outside any
        transaction; skipped inside one, and when the role may not vacuum them)."""
        if getattr(self._local, "conn", None) is not None:
            return
        with self._pool.connection() as conn:
            conn.autocommit = True
            try:
                for table in ("documents", "documents_fts", "content", "content_vectors"):
                    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
            except psycopg.Error:
                pass
            finally:
                conn.autocommit = False

    def size_bytes(self) -> int:
        """Tables, indexes and TOAST of this index's schema."""
        value = self._scalar(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        )
        return int(value or 0)
