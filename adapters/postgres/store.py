"""`PostgresIndex`: the index in a PostgreSQL database (pgvector for embeddings) behind the
DocumentStore, IndexMaintenance, LexicalIndex, VectorIndex and LlmCache ports.

Every public method is one unit of work on a pooled connection (one transaction, committed
when the method returns), so any number of threads, and of processes, share one index: readers
see the last committed state (READ COMMITTED), writers serialise on row locks. `transaction()`
pins one connection to the calling thread and groups everything the thread does until it ends
into a single commit, as `SqliteIndex.transaction` does. Two indexers are kept apart by the
advisory locks of `index_lock` (docs/decisions/0043).
"""

from __future__ import annotations

import json
import os
import random
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from adapters.postgres.bm25 import ranked_rows
from adapters.postgres.bulk import copy_rows
from adapters.postgres.schema import TS_CONFIG, VECTORS_HNSW_DDL, migrate, vectors_ddl
from adapters.postgres.tsquery import MAX_INDEXED_CHARS, fold
from adapters.postgres.url import is_postgres_url, redact, split_schema
from domain.errors import CONFLICT, INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE, QmdError
from domain.extraction import (
    CACHE_COLUMNS,
    STATE_COLUMNS,
    CachedExtraction,
    ExtractionState,
    cached_from_row,
    state_from_row,
)
from domain.filters import AllOf, HasKey, HasValue, MetaValue, Probe
from domain.lexquery import LexQuery
from domain.metadata import as_json, from_json
from domain.model import DEFAULT_PATTERN, Collection, Document, DocumentMeta, LexHit, VectorHit
from domain.ports import ChunkRow, CollectionCount, DocumentCut, UpsertOutcome

LLM_CACHE_KEEP = 1000

# The BM25 sum is reported as is (negated, as FTS5's bm25): it spreads over the same range.
RANK_SCALE = 1.0

DEFAULT_EF_SEARCH = 100
COLUMN_SEPARATOR = "qmdcolumnseparator"

DIMENSION_MISMATCH = (
    "Embedding dimension mismatch: existing vectors are {existing}d but the current model "
    "produces {current}d. Run 'qmd embed -f' to re-embed with the new model."
)

_META_COLUMNS = (
    "d.id, d.collection, d.path, d.title, d.hash, d.created_at, d.modified_at, LENGTH(content.doc)"
)
_META_FROM = "FROM documents d JOIN content ON content.hash = d.hash"

_ORPHAN_VECTOR_COUNT = (
    "SELECT COUNT(*) FROM content_vectors cv WHERE NOT EXISTS ("
    "SELECT 1 FROM documents d WHERE d.hash = cv.hash AND d.active = 1)"
)


def _now_iso() -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _meta(row: Sequence[Any]) -> DocumentMeta:
    return DocumentMeta(
        id=int(row[0]),
        collection=str(row[1]),
        path=str(row[2]),
        title=str(row[3]),
        hash=str(row[4]),
        created_at=str(row[5]),
        modified_at=str(row[6]),
        body_length=int(row[7] or 0),
    )


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def _probe_sql(probe: Probe, params: list[Any]) -> str:
    """`probe` as a condition on the metadata row `m` that its GIN index answers: `@>` holds
    a scalar inside a list only at the top level, so a value is looked for both ways."""
    if isinstance(probe, HasValue):
        params += [
            json.dumps({probe.key: probe.value}),
            json.dumps({probe.key: [probe.value]}),
        ]
        return (
            "(qmd_metadata_jsonb(m.metadata) @> %s::jsonb"
            " OR qmd_metadata_jsonb(m.metadata) @> %s::jsonb)"
        )
    if isinstance(probe, HasKey):
        params.append(probe.key)
        return "qmd_metadata_jsonb(m.metadata) ? %s"
    if not probe.probes:
        return "TRUE" if isinstance(probe, AllOf) else "FALSE"
    joiner = " AND " if isinstance(probe, AllOf) else " OR "
    return "(" + joiner.join(_probe_sql(part, params) for part in probe.probes) + ")"


def escape_like(value: str) -> str:
    return value.replace("#", "##").replace("%", "#%").replace("_", "#_")


def fts_row_sql() -> str:
    """Parameters: id, folded path, folded title, folded body.

    The three columns share one tsvector; a separator word ends the first two and is deleted
    afterwards, leaving a gap in the positions so that no phrase can match across columns
    (FTS5 keeps columns apart the same way)."""
    sep = f" {COLUMN_SEPARATOR}"
    return (
        "INSERT INTO documents_fts (id, tsv, len) SELECT %s, t, length(t) FROM (SELECT ts_delete("
        f"setweight(to_tsvector('{TS_CONFIG}', %s || '{sep}'), 'C') || "
        f"setweight(to_tsvector('{TS_CONFIG}', %s || '{sep}'), 'B') || "
        f"setweight(to_tsvector('{TS_CONFIG}', %s), 'D'), '{COLUMN_SEPARATOR}'::text) AS t) s "
        "ON CONFLICT (id) DO UPDATE SET tsv = excluded.tsv, len = excluded.len"
    )


def fts_params(doc_id: int, collection: str, path: str, title: str, body: str) -> tuple[Any, ...]:
    return (doc_id, fold(f"{collection}/{path}"), fold(title), fold(body[:MAX_INDEXED_CHARS]))


_LIVE_CHUNKS = (
    "SELECT c.id, d.collection, d.path, c.seq, c.heading_path, c.start_line, c.end_line, c.text "
    "FROM pyqmd_chunks c JOIN documents d ON d.id = c.doc_id AND d.hash = c.hash "
    "AND d.active = 1"
)
_CHUNK_COPY_COLUMNS = (
    ("doc_id", "int8"),
    ("hash", "text"),
    ("seq", "int4"),
    ("heading_path", "text"),
    ("start_line", "int4"),
    ("end_line", "int4"),
    ("text", "text"),
)


def _chunk_row(row: Sequence[Any]) -> ChunkRow:
    return ChunkRow(
        id=int(row[0]),
        collection=str(row[1]),
        path=str(row[2]),
        seq=int(row[3]),
        heading_path=str(row[4]),
        start_line=int(row[5]),
        end_line=int(row[6]),
        text=str(row[7]),
    )


class PostgresError(QmdError):
    pass


def _holder_label(lock: str) -> str:
    """`pid N on HOST: qmd LOCK` (PostgreSQL keeps 63 bytes of an application_name)."""
    return f"pid {os.getpid()} on {socket.gethostname()}: qmd {lock}"[:63]


def schema_exists(url: str) -> bool:
    """Whether the URL's `?schema=` exists already (False without one: the user's default)."""
    conninfo, schema = split_schema(url)
    if not schema:
        return False
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def drop_schema(url: str) -> None:
    """Drop the URL's `?schema=` with everything in it (a copy that made it and failed)."""
    conninfo, schema = split_schema(url)
    if not schema:
        return
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class PostgresIndex:
    """One index in one PostgreSQL schema (`?schema=` in the URL, else the user's default)."""

    def __init__(self, url: str, env: Mapping[str, str] | None = None) -> None:
        environ = os.environ if env is None else env
        self.url = url
        conninfo, schema = split_schema(url)
        self.schema = schema
        kwargs: dict[str, Any] = {}
        if schema:
            kwargs["options"] = f"-c search_path={schema},public"
        self._ef_search = int(environ.get("QMD_PG_EF_SEARCH") or DEFAULT_EF_SEARCH)
        max_size = int(environ.get("QMD_PG_POOL_SIZE") or 8)
        self._local = threading.local()
        self._busy: set[psycopg.Connection[tuple[Any, ...]]] = set()
        try:
            if schema:
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                    )
            self._pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
                conninfo, min_size=1, max_size=max_size, kwargs=kwargs, open=False
            )
            self._pool.open(wait=True, timeout=30)
            with self._pool.connection() as conn:
                conn.autocommit = True
                try:
                    migrate(conn)
                finally:
                    conn.autocommit = False
        except psycopg.Error as exc:
            raise QmdError(
                UNAVAILABLE, f"cannot open the PostgreSQL index {redact(url)}: {exc}"
            ) from exc

    @classmethod
    def open(cls, url: str, env: Mapping[str, str] | None = None) -> PostgresIndex:
        return cls(url, env)

    # ------------------------------------------------------------------ plumbing

    @property
    def path(self) -> str:
        return redact(self.url)

    @property
    def vec_available(self) -> bool:
        return True  # the schema migration created (or found) the vector extension

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        pinned = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        with self._pool.connection() as conn:
            self._busy.add(conn)
            try:
                yield conn
            finally:
                self._busy.discard(conn)

    def interrupt(self) -> None:
        """Cancel the statements running on this index's connections (a timed-out request)."""
        for conn in list(self._busy):
            with suppress(psycopg.Error):
                conn.cancel_safe(timeout=2)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """The calling thread's connection (pinned by `transaction()`, else one from the pool,
        committed when the block ends): for bulk work such as COPY."""
        with self._conn() as conn:
            yield conn

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._conn() as conn:
            return conn.execute(statement, params).fetchall()

    def _scalar(self, statement: str, params: Sequence[Any] = ()) -> Any:
        rows = self._query(statement, params)
        return rows[0][0] if rows else None

    def _execute(self, statement: str, params: Sequence[Any] = ()) -> int:
        with self._conn() as conn:
            return conn.execute(statement, params).rowcount

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group many writes (a whole `update`) into one commit; calls nest."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self._pool.connection() as conn:
            self._local.conn = conn
            self._busy.add(conn)
            try:
                yield
            finally:
                self._local.conn = None
                self._busy.discard(conn)

    @contextmanager
    def index_lock(self, name: str, wait: bool = True) -> Iterator[bool]:
        """A session advisory lock named `name` in this index's schema, held on a connection
        of its own until the block ends (released by the server if the process dies).
        Yields False at once when `wait` is False and another process holds it."""
        key = f"qmd-{name}:{self.schema or ''}"
        with self._pool.connection() as conn:
            conn.autocommit = True
            try:
                got = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()
                held = bool(got and got[0])
                if not held and wait:
                    conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
                    held = True
                if held:  # who holds it, for another process's refusal (lock_holder)
                    conn.execute(
                        "SELECT set_config('application_name', %s, false)",
                        (_holder_label(name),),
                    )
                try:
                    yield held
                finally:
                    if held:
                        conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
                        conn.execute("SELECT set_config('application_name', 'qmd', false)")
            finally:
                conn.autocommit = False

    def lock_holder(self, name: str) -> str | None:
        """Who holds this index's advisory lock `name`: the label its holder set
        (`pid N on HOST: qmd embed`), or None when nobody does."""
        key = f"qmd-{name}:{self.schema or ''}"
        # pg_advisory_lock(bigint) shows in pg_locks as two 32-bit halves, objsubid 1
        row = self._scalar(
            "SELECT a.application_name FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND l.classid = ((hashtext(%s)::bigint >> 32) & 4294967295)::oid "
            "AND l.objid = (hashtext(%s)::bigint & 4294967295)::oid LIMIT 1",
            (key, key),
        )
        return str(row) if row else None

    def lock_is_free(self, name: str) -> bool:
        key = f"qmd-{name}:{self.schema or ''}"
        with self._conn() as conn:
            row = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()
            if row and row[0]:
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
                return True
        return False

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> PostgresIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    # ------------------------------------------------------------------ collections

    @staticmethod
    def _collection(row: Sequence[Any]) -> Collection:
        name, path, pattern, ignore_json, include, update_command, context_json = row
        ignore: tuple[str, ...] = ()
        if ignore_json:
            parsed = json.loads(ignore_json)
            if isinstance(parsed, list):
                ignore = tuple(str(item) for item in parsed)
        contexts: dict[str, str] = {}
        if context_json:
            parsed_ctx = json.loads(context_json)
            if isinstance(parsed_ctx, dict):
                contexts = {str(k): str(v) for k, v in parsed_ctx.items()}
        return Collection(
            name=str(name),
            path=str(path),
            pattern=str(pattern or DEFAULT_PATTERN),
            ignore=ignore,
            include_by_default=include != 0,
            update_command=str(update_command) if update_command else None,
            contexts=contexts,
        )

    _COLLECTION_COLUMNS = (
        "name, path, pattern, ignore_patterns, include_by_default, update_command, context"
    )

    def list_collections(self) -> list[Collection]:
        rows = self._query(f"SELECT {self._COLLECTION_COLUMNS} FROM store_collections ORDER BY ord")
        return [self._collection(r) for r in rows]

    def get_collection(self, name: str) -> Collection | None:
        rows = self._query(
            f"SELECT {self._COLLECTION_COLUMNS} FROM store_collections WHERE name = %s", (name,)
        )
        return self._collection(rows[0]) if rows else None

    def put_collection(self, collection: Collection) -> None:
        self._execute(
            "INSERT INTO store_collections (name, path, pattern, ignore_patterns, "
            "include_by_default, update_command, context) VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET path = excluded.path, pattern = excluded.pattern, "
            "ignore_patterns = excluded.ignore_patterns, "
            "include_by_default = excluded.include_by_default, "
            "update_command = excluded.update_command, context = excluded.context",
            (
                collection.name,
                collection.path,
                collection.pattern or DEFAULT_PATTERN,
                json.dumps(list(collection.ignore), ensure_ascii=False)
                if collection.ignore
                else None,
                1 if collection.include_by_default else 0,
                collection.update_command or None,
                json.dumps(dict(collection.contexts), ensure_ascii=False, separators=(",", ":"))
                if collection.contexts
                else None,
            ),
        )

    def delete_collection(self, name: str) -> int:
        with self.transaction(), self._conn() as conn:
            deleted = conn.execute("DELETE FROM documents WHERE collection = %s", (name,)).rowcount
            conn.execute(
                "DELETE FROM content WHERE hash NOT IN "
                "(SELECT DISTINCT hash FROM documents WHERE active = 1)"
            )
            conn.execute("DELETE FROM store_collections WHERE name = %s", (name,))
        return int(deleted)

    def forget_collection(self, name: str) -> None:
        self._execute("DELETE FROM store_collections WHERE name = %s", (name,))

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

    def get_global_context(self) -> str | None:
        value = self._scalar("SELECT value FROM store_config WHERE key = 'global_context'")
        return str(value) if value else None

    def set_global_context(self, text: str | None) -> None:
        self.set_config_value("global_context", text)

    def get_config_value(self, key: str) -> str | None:
        value = self._scalar("SELECT value FROM store_config WHERE key = %s", (key,))
        return None if value is None else str(value)

    def set_config_value(self, key: str, value: str | None) -> None:
        if value is None:
            self._execute("DELETE FROM store_config WHERE key = %s", (key,))
            return
        self._execute(
            "INSERT INTO store_config (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # ------------------------------------------------------------------ indexing

    def active_documents(self, collection: str) -> dict[str, DocumentMeta]:
        rows = self._query(
            f"SELECT {_META_COLUMNS} {_META_FROM} WHERE d.collection = %s AND d.active = 1 "
            "ORDER BY d.id",
            (collection,),
        )
        return {str(r[2]): _meta(r) for r in rows}

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
        with self.transaction(), self._conn() as conn:
            existing = conn.execute(
                "SELECT id, hash, title FROM documents "
                "WHERE collection = %s AND path = %s AND active = 1",
                (collection, path),
            ).fetchone()
            if existing is not None:
                doc_id, old_hash, old_title = int(existing[0]), existing[1], existing[2]
                if old_hash == content_hash:
                    if old_title == title:
                        return UpsertOutcome("unchanged")
                    conn.execute(
                        "UPDATE documents SET title = %s, modified_at = %s WHERE id = %s",
                        (title, modified_at, doc_id),
                    )
                else:
                    self._insert_content(conn, content_hash, body, modified_at)
                    conn.execute(
                        "UPDATE documents SET title = %s, hash = %s, modified_at = %s "
                        "WHERE id = %s",
                        (title, content_hash, modified_at, doc_id),
                    )
                self._write_fts(conn, doc_id)
                return UpsertOutcome("updated")
            self._insert_content(conn, content_hash, body, modified_at)
            row = conn.execute(
                "INSERT INTO documents (collection, path, title, hash, created_at, modified_at, "
                "active) VALUES (%s, %s, %s, %s, %s, %s, 1) ON CONFLICT (collection, path) "
                "DO UPDATE SET title = excluded.title, hash = excluded.hash, "
                "modified_at = excluded.modified_at, active = 1 RETURNING id",
                (collection, path, title, content_hash, created_at, modified_at),
            ).fetchone()
            assert row is not None
            self._write_fts(conn, int(row[0]))
            return UpsertOutcome("indexed")

    @staticmethod
    def _insert_content(
        conn: psycopg.Connection[tuple[Any, ...]], content_hash: str, body: str, created_at: str
    ) -> None:
        conn.execute(
            "INSERT INTO content (hash, doc, created_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (hash) DO NOTHING",
            (content_hash, body, created_at),
        )

    def deactivate_documents(self, collection: str, paths: Sequence[str]) -> int:
        changed = 0
        with self.transaction(), self._conn() as conn:
            for path in paths:
                row = conn.execute(
                    "UPDATE documents SET active = 0 "
                    "WHERE collection = %s AND path = %s AND active = 1 RETURNING id",
                    (collection, path),
                ).fetchone()
                if row is not None:
                    changed += 1
                    conn.execute("DELETE FROM documents_fts WHERE id = %s", (int(row[0]),))
        return changed

    def delete_orphan_content(self) -> int:
        return self._execute(
            "DELETE FROM content WHERE hash NOT IN (SELECT DISTINCT hash FROM documents)"
        )

    # ------------------------------------------------------------------ lookups

    def _one(self, where: str, params: Sequence[Any]) -> DocumentMeta | None:
        rows = self._query(
            f"SELECT {_META_COLUMNS} {_META_FROM} WHERE {where} AND d.active = 1 "
            "ORDER BY d.id LIMIT 1",
            tuple(params),
        )
        return _meta(rows[0]) if rows else None

    def document_by_docid(self, prefix: str) -> DocumentMeta | None:
        if not prefix:
            return None
        return self._one(
            f"{_ASCII_LOWER.format('d.hash')} LIKE %s ESCAPE '#'",
            (escape_like(_ascii_lower(prefix)) + "%",),
        )

    def document_by_path(self, collection: str, path: str) -> DocumentMeta | None:
        return self._one("d.collection = %s AND d.path = %s", (collection, path))

    def document_by_suffix(self, suffix: str) -> DocumentMeta | None:
        """`qmd://c/p` ending with `suffix`, ASCII-case-insensitively (SQLite's LIKE)."""
        return self._one(
            _ASCII_LOWER.format("'qmd://' || d.collection || '/' || d.path")
            + " LIKE %s ESCAPE '#'",
            ("%" + escape_like(_ascii_lower(suffix)),),
        )

    def documents(self, collection: str | None = None) -> list[DocumentMeta]:
        if collection is None:
            rows = self._query(
                f"SELECT {_META_COLUMNS} {_META_FROM} WHERE d.active = 1 ORDER BY d.id"
            )
        else:
            rows = self._query(
                f"SELECT {_META_COLUMNS} {_META_FROM} WHERE d.active = 1 AND d.collection = %s "
                "ORDER BY d.id",
                (collection,),
            )
        return [_meta(r) for r in rows]

    def document_paths(self) -> list[tuple[str, str]]:
        rows = self._query("SELECT collection, path FROM documents WHERE active = 1 ORDER BY id")
        return [(str(collection), str(path)) for collection, path in rows]

    def body(self, content_hash: str) -> str:
        value = self._scalar("SELECT doc FROM content WHERE hash = %s", (content_hash,))
        if value is None:
            raise QmdError(NOT_FOUND, f"Content not found: {content_hash}")
        return str(value)

    # ------------------------------------------------------------------ status and upkeep

    def collection_counts(self) -> list[CollectionCount]:
        rows = self._query(
            "SELECT collection, COUNT(*), MAX(modified_at) FROM documents WHERE active = 1 "
            'GROUP BY collection ORDER BY collection COLLATE "C"'
        )
        return [CollectionCount(str(r[0]), int(r[1]), str(r[2] or "")) for r in rows]

    def total_documents(self) -> int:
        return int(self._scalar("SELECT COUNT(*) FROM documents WHERE active = 1") or 0)

    def vector_count(self) -> int:
        return int(
            self._scalar(
                "SELECT COUNT(*) FROM content_vectors cv WHERE EXISTS ("
                "SELECT 1 FROM documents d WHERE d.hash = cv.hash AND d.active = 1)"
            )
            or 0
        )

    def orphaned_vector_count(self) -> int:
        return int(self._scalar(_ORPHAN_VECTOR_COUNT) or 0)

    def embedded_by_model(self) -> dict[str, int]:
        rows = self._query(
            "SELECT v.model, COUNT(DISTINCT v.hash) FROM content_vectors v"
            " WHERE v.hash IN (SELECT hash FROM documents WHERE active = 1)"
            " GROUP BY v.model ORDER BY v.model"
        )
        return {str(model): int(count) for model, count in rows}

    def preview_cleanup(self) -> dict[str, int]:
        return {
            "cache_entries": int(self._scalar("SELECT COUNT(*) FROM llm_cache") or 0),
            "orphaned_vectors": int(self._scalar(_ORPHAN_VECTOR_COUNT) or 0),
            "inactive_documents": int(
                self._scalar("SELECT COUNT(*) FROM documents WHERE active = 0") or 0
            ),
            "orphaned_content": int(
                self._scalar(
                    "SELECT COUNT(*) FROM content WHERE hash NOT IN "
                    "(SELECT DISTINCT hash FROM documents WHERE active = 1)"
                )
                or 0
            ),
        }

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

    # ------------------------------------------------------------------ metadata

    def put_metadata(self, collection: str, path: str, metadata: Mapping[str, MetaValue]) -> None:
        """Replace the metadata of the active document at (collection, path), if any; an
        unchanged value is not rewritten (no dead tuple per unchanged document on update)."""
        encoded = json.dumps(as_json(metadata), ensure_ascii=False, separators=(",", ":"))
        self._execute(
            "INSERT INTO py_document_metadata (doc_id, metadata) SELECT d.id, %s "
            "FROM documents d WHERE d.collection = %s AND d.path = %s AND d.active = 1 "
            "ON CONFLICT (doc_id) DO UPDATE SET metadata = excluded.metadata "
            "WHERE py_document_metadata.metadata IS DISTINCT FROM excluded.metadata",
            (encoded, collection, path),
        )

    def active_metadata(
        self, collections: Sequence[str] | None, narrowing: Probe | None = None
    ) -> list[tuple[int, dict[str, MetaValue]]]:
        """Every active document's metadata (with `narrowing`, those meeting it, found through
        the GIN index of migration 8), as ONE JSON array built by the server and decoded by
        one `json.loads`."""
        statement = (
            "SELECT COALESCE('[' || string_agg('[' || d.id || ',' || "
            "COALESCE(m.metadata, '{}') || ']', ',' ORDER BY d.id) || ']', '[]') "
            "FROM documents d LEFT JOIN py_document_metadata m ON m.doc_id = d.id "
            "WHERE d.active = 1"
        )
        params: list[Any] = []
        if collections is not None:
            statement += " AND d.collection = ANY(%s)"
            params.append(list(collections))
        if narrowing is not None:
            statement += f" AND {_probe_sql(narrowing, params)}"
        rows = json.loads(str(self._scalar(statement, params) or "[]"))
        return [(int(i), from_json(raw) if isinstance(raw, dict) else {}) for i, raw in rows]

    def metadata_by_id(self, ids: Sequence[int]) -> dict[int, dict[str, MetaValue]]:
        rows = self._query(
            "SELECT doc_id, metadata FROM py_document_metadata WHERE doc_id = ANY(%s)",
            (sorted({int(i) for i in ids}),),
        )
        found: dict[int, dict[str, MetaValue]] = {}
        for doc_id, text in rows:
            try:
                raw = json.loads(str(text))
            except ValueError:
                raw = None
            found[int(doc_id)] = from_json(raw) if isinstance(raw, dict) else {}
        return found

    # ------------------------------------------------------------------ extraction ledger

    def cached_extraction(self, source_hash: str) -> CachedExtraction | None:
        rows = self._query(
            f"SELECT {CACHE_COLUMNS} FROM extraction_cache WHERE source_hash = %s",
            (source_hash,),
        )
        if not rows:
            return None
        return cached_from_row(rows[0])

    def remember_extraction(self, outcome: CachedExtraction) -> None:
        self._execute(
            "INSERT INTO extraction_cache (source_hash, status, text_hash, title, metadata, "
            "pages, empty_pages, reason, detail) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (source_hash) DO UPDATE SET status = excluded.status, "
            "text_hash = excluded.text_hash, title = excluded.title, "
            "metadata = excluded.metadata, pages = excluded.pages, "
            "empty_pages = excluded.empty_pages, reason = excluded.reason, "
            "detail = excluded.detail",
            (
                outcome.source_hash,
                outcome.status,
                outcome.text_hash,
                outcome.title,
                json.dumps(dict(outcome.metadata), ensure_ascii=False, sort_keys=True),
                outcome.pages,
                json.dumps(list(outcome.empty_pages)),
                outcome.reason,
                outcome.detail,
            ),
        )

    def record_states(self, collection: str, states: Sequence[ExtractionState]) -> None:
        """Replace the collection's states in one transaction (readers see old or new)."""
        with self.transaction(), self._conn() as conn:
            conn.execute("DELETE FROM extraction_state WHERE collection = %s", (collection,))
            if not states:
                return
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO extraction_state ({STATE_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (collection, path) DO UPDATE SET status = excluded.status, "
                    "reason = excluded.reason, detail = excluded.detail, "
                    "source_hash = excluded.source_hash, pages = excluded.pages, "
                    "empty_pages = excluded.empty_pages, extracted_at = excluded.extracted_at",
                    [
                        (
                            s.collection,
                            s.path,
                            s.status,
                            s.reason,
                            s.detail,
                            s.source_hash,
                            s.pages,
                            json.dumps(list(s.empty_pages)),
                            s.extracted_at,
                        )
                        for s in states
                    ],
                )

    def extraction_states(self, collection: str | None = None) -> list[ExtractionState]:
        if collection is None:
            rows = self._query(
                f"SELECT {STATE_COLUMNS} FROM extraction_state "
                'ORDER BY collection COLLATE "C", path COLLATE "C"'
            )
        else:
            rows = self._query(
                f"SELECT {STATE_COLUMNS} FROM extraction_state WHERE collection = %s "
                'ORDER BY path COLLATE "C"',
                (collection,),
            )
        return [state_from_row(r) for r in rows]

    def extraction_state(self, collection: str, path: str) -> ExtractionState | None:
        rows = self._query(
            f"SELECT {STATE_COLUMNS} FROM extraction_state WHERE collection = %s AND path = %s",
            (collection, path),
        )
        return state_from_row(rows[0]) if rows else None

    # ------------------------------------------------------------------ memory rows

    def memory_topics(self) -> list[tuple[str, bytes]]:
        rows = self._query('SELECT name, vector FROM memory_topics ORDER BY name COLLATE "C"')
        return [(str(name), bytes(blob)) for name, blob in rows]

    def put_memory_topic(self, name: str, vector: bytes) -> None:
        self._execute(
            "INSERT INTO memory_topics (name, vector, created_at) VALUES (%s, %s, "
            "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')) "
            "ON CONFLICT (name) DO UPDATE SET vector = excluded.vector, "
            "created_at = excluded.created_at",
            (name, vector),
        )

    def memory_record(self, record_id: str) -> tuple[str, bytes] | None:
        rows = self._query("SELECT record, vector FROM memory_records WHERE id = %s", (record_id,))
        return (str(rows[0][0]), bytes(rows[0][1])) if rows else None

    def memory_records(self, topic: str | None, kind: str | None) -> list[tuple[str, bytes]]:
        statement = "SELECT record, vector FROM memory_records WHERE true"
        params: list[str] = []
        if topic is not None:
            statement += " AND topic = %s"
            params.append(topic)
        if kind is not None:
            statement += " AND kind = %s"
            params.append(kind)
        rows = self._query(statement + ' ORDER BY id COLLATE "C"', params)
        return [(str(raw), bytes(blob)) for raw, blob in rows]

    def memory_path(self, record_id: str) -> str | None:
        value = self._scalar("SELECT path FROM memory_records WHERE id = %s", (record_id,))
        return None if value is None else str(value)

    def memory_files(self) -> list[tuple[str, str, str, bytes]]:
        rows = self._query("SELECT id, path, file_hash, vector FROM memory_records")
        return [(str(i), str(p), str(h), bytes(v)) for i, p, h, v in rows]

    def put_memory_records(
        self, rows: Sequence[tuple[str, str, str, str, str, str, bytes]]
    ) -> None:
        if not rows:
            return
        with self.transaction(), self._conn() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_records (id, kind, topic, path, file_hash, record, vector) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
                "kind = excluded.kind, topic = excluded.topic, path = excluded.path, "
                "file_hash = excluded.file_hash, record = excluded.record, "
                "vector = excluded.vector",
                list(rows),
            )

    def sync_memory_records(
        self,
        gone: Sequence[str],
        paths: Mapping[str, str],
        refreshed: Sequence[tuple[str, str, str]],
    ) -> None:
        with self.transaction(), self._conn() as conn:
            if gone:
                conn.execute("DELETE FROM memory_records WHERE id = ANY(%s)", (list(gone),))
            with conn.cursor() as cur:
                if paths:
                    cur.executemany(
                        "UPDATE memory_records SET path = %s WHERE id = %s AND path <> %s",
                        [(path, record_id, path) for record_id, path in paths.items()],
                    )
                if refreshed:
                    cur.executemany(
                        "UPDATE memory_records SET file_hash = %s, record = %s WHERE id = %s",
                        list(refreshed),
                    )

    # ------------------------------------------------------------------ chunk rows (projmem)

    def unchunked_documents(self) -> list[tuple[int, str]]:
        rows = self._query(
            "SELECT d.id, d.hash FROM documents d WHERE d.active = 1 AND NOT EXISTS ("
            "SELECT 1 FROM pyqmd_chunks c WHERE c.doc_id = d.id AND c.hash = d.hash) "
            "ORDER BY d.id"
        )
        return [(int(doc_id), str(hash_)) for doc_id, hash_ in rows]

    def prune(self) -> int:
        return self._execute(
            "DELETE FROM pyqmd_chunks c WHERE NOT EXISTS (SELECT 1 FROM documents d "
            "WHERE d.id = c.doc_id AND d.hash = c.hash AND d.active = 1)"
        )

    def replace_chunks(self, cuts: Sequence[DocumentCut]) -> None:
        """One transaction: the documents' rows go, their sections come in with new ids
        (COPY, as an update writes every document's rows)."""
        if not cuts:
            return
        with self.transaction(), self._conn() as conn:
            conn.execute(
                "DELETE FROM pyqmd_chunks WHERE doc_id = ANY(%s)",
                (sorted({int(cut.doc_id) for cut in cuts}),),
            )
            copy_rows(
                conn,
                "pyqmd_chunks",
                _CHUNK_COPY_COLUMNS,
                (
                    (cut.doc_id, cut.content_hash, *section)
                    for cut in cuts
                    for section in cut.sections
                ),
            )

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[ChunkRow]:
        wanted = [int(i) for i in chunk_ids]
        rows = self._query(f"{_LIVE_CHUNKS} WHERE c.id = ANY(%s)", (sorted(set(wanted)),))
        found = {int(r[0]): _chunk_row(r) for r in rows}
        return [found[i] for i in wanted if i in found]

    def document_chunks(self, collection: str, path: str) -> list[ChunkRow]:
        rows = self._query(
            f"{_LIVE_CHUNKS} WHERE d.collection = %s AND d.path = %s ORDER BY c.seq",
            (collection, path),
        )
        return [_chunk_row(r) for r in rows]

    def live_chunk_count(self, collections: Sequence[str] | None = None) -> int:
        live = (
            "SELECT COUNT(*) FROM pyqmd_chunks c JOIN documents d ON d.id = c.doc_id "
            "AND d.hash = c.hash AND d.active = 1"
        )
        if collections is None:
            return int(self._scalar(live) or 0)
        return int(self._scalar(f"{live} WHERE d.collection = ANY(%s)", (list(collections),)) or 0)

    def namespace_ids(self, names: Sequence[str]) -> dict[str, int]:
        wanted = list(dict.fromkeys(names))
        with self.transaction(), self._conn() as conn:
            conn.execute(
                "INSERT INTO pyqmd_namespaces (name) SELECT unnest(%s::text[]) "
                "ON CONFLICT (name) DO NOTHING",
                (wanted,),
            )
            rows = conn.execute(
                "SELECT name, id FROM pyqmd_namespaces WHERE name = ANY(%s)", (wanted,)
            ).fetchall()
        known = {str(name): int(i) for name, i in rows}
        return {name: known[name] for name in names}

    def llm_cache_entries(self) -> int:
        return int(self._scalar("SELECT COUNT(*) FROM llm_cache") or 0)

    def embedding_dimensions(self) -> int | None:
        return self.vector_dimensions()

    def get_summary(self, session_id: str) -> str | None:
        value = self._scalar(
            "SELECT summary_json FROM pyqmd_session_summaries WHERE session_id = %s",
            (session_id,),
        )
        return None if value is None else str(value)

    def put_summary(self, session_id: str, summary_json: str, updated_at: str) -> None:
        self._execute(
            "INSERT INTO pyqmd_session_summaries (session_id, summary_json, updated_at) "
            "VALUES (%s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET "
            "summary_json = excluded.summary_json, updated_at = excluded.updated_at",
            (session_id, summary_json, updated_at),
        )

    def summarized_ids(self) -> set[str]:
        return {str(r[0]) for r in self._query("SELECT session_id FROM pyqmd_session_summaries")}

    # ------------------------------------------------------------------ lexical search

    def search_lex(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[LexHit]:
        """Full-text search ranked by BM25 (adapters/postgres/bm25.py); never raises on user
        input. `within`: only these document ids (a metadata filter), applied before the limit."""
        return [
            LexHit(document=Document(meta=_meta(r), body=str(r[8])), bm25=-float(r[9]) * RANK_SCALE)
            for r in ranked_rows(self._query, query, limit, collection, within)
        ]

    # ------------------------------------------------------------------ vectors

    def has_vector_index(self) -> bool:
        return self._scalar("SELECT to_regclass('vectors_vec')") is not None

    def vector_dimensions(self) -> int | None:
        value = self._scalar(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('vectors_vec') "
            "AND attname = 'embedding'"
        )
        return None if value is None or int(value) <= 0 else int(value)

    def pending_hashes(self, model: str, fingerprint: str) -> list[str]:
        rows = self._query(
            "SELECT d.hash FROM documents d LEFT JOIN ("
            " SELECT hash, COUNT(*) AS chunk_count, MAX(total_chunks) AS expected_chunks"
            " FROM content_vectors WHERE model = %s AND embed_fingerprint = %s"
            " GROUP BY hash) v ON d.hash = v.hash"
            " WHERE d.active = 1 AND (v.hash IS NULL OR v.chunk_count < v.expected_chunks)"
            ' GROUP BY d.hash ORDER BY MIN(d.path COLLATE "C"), d.hash',
            (model, fingerprint),
        )
        return [str(r[0]) for r in rows]

    def pending_count(self, model: str, fingerprint: str) -> int:
        return int(
            self._scalar(
                "SELECT COUNT(DISTINCT d.hash) FROM documents d LEFT JOIN ("
                " SELECT hash, COUNT(*) AS chunk_count, MAX(total_chunks) AS expected_chunks"
                " FROM content_vectors WHERE model = %s AND embed_fingerprint = %s"
                " GROUP BY hash) v ON d.hash = v.hash"
                " WHERE d.active = 1 AND (v.hash IS NULL OR v.chunk_count < v.expected_chunks)",
                (model, fingerprint),
            )
            or 0
        )

    def ensure_vector_table(self, conn: psycopg.Connection[tuple[Any, ...]], dims: int) -> None:
        if self.has_vector_index():
            existing = self.vector_dimensions()
            if existing is not None and existing != dims:
                raise QmdError(
                    INVALID_ARGUMENT, DIMENSION_MISMATCH.format(existing=existing, current=dims)
                )
            return
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('qmd-vectors:' || current_schema()))")
        if conn.execute("SELECT to_regclass('vectors_vec')").fetchone() not in (None, (None,)):
            return
        for statement in vectors_ddl(dims):
            conn.execute(statement)

    def store_chunk_vectors(
        self,
        content_hash: str,
        chunks: Sequence[tuple[int, int, Sequence[float]]],
        model: str,
        fingerprint: str,
        embedded_at: str,
    ) -> None:
        if not chunks:
            return
        dims = len(chunks[0][2])
        for _, _, vector in chunks:
            if len(vector) != dims:
                raise QmdError(
                    INVALID_ARGUMENT, DIMENSION_MISMATCH.format(existing=dims, current=len(vector))
                )
        with self.transaction(), self._conn() as conn:
            self.ensure_vector_table(conn, dims)
            conn.execute("DELETE FROM vectors_vec WHERE hash = %s", (content_hash,))
            conn.execute("DELETE FROM content_vectors WHERE hash = %s", (content_hash,))
            total = len(chunks)
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO content_vectors (hash, seq, pos, model, embed_fingerprint, "
                    "total_chunks, embedded_at) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (hash, seq) DO UPDATE SET pos = excluded.pos, "
                    "model = excluded.model, embed_fingerprint = excluded.embed_fingerprint, "
                    "total_chunks = excluded.total_chunks, embedded_at = excluded.embedded_at",
                    [
                        (content_hash, int(seq), int(pos), model, fingerprint, total, embedded_at)
                        for seq, pos, _ in chunks
                    ],
                )
                cur.executemany(
                    "INSERT INTO vectors_vec (hash, seq, embedding) VALUES (%s, %s, %s::vector) "
                    "ON CONFLICT (hash, seq) DO UPDATE SET embedding = excluded.embedding",
                    [(content_hash, int(seq), vector_literal(vec)) for seq, _, vec in chunks],
                )

    def clear_vectors(self) -> None:
        with self.transaction(), self._conn() as conn:
            conn.execute("DELETE FROM content_vectors")
            conn.execute("DROP TABLE IF EXISTS vectors_vec")

    def search_vectors(
        self,
        vector: Sequence[float],
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[VectorHit]:
        """Best chunk per document by cosine distance, ascending, from the HNSW index.
        `within`: only these document ids (a metadata filter), applied inside the scan.

        With a collection, pgvector's iterative scan keeps walking the graph until enough of
        the collection's own chunks are found, so a small collection is not starved by a
        crowded one (the SQLite adapter's exact-scan fallback, done by the index)."""
        if limit <= 0 or not self.has_vector_index():
            return []
        dims = self.vector_dimensions()
        if dims is not None and dims != len(vector):
            raise QmdError(
                INVALID_ARGUMENT, DIMENSION_MISMATCH.format(existing=dims, current=len(vector))
            )
        literal = vector_literal(vector)
        wanted = max(limit * 3, limit)
        member = ""
        params: list[Any] = [literal]
        if collection or within is not None:
            member = (
                " WHERE EXISTS (SELECT 1 FROM documents d0 WHERE d0.hash = v.hash AND d0.active = 1"
            )
            if collection:
                member += " AND d0.collection = %s"
                params.append(collection)
            if within is not None:
                member += " AND d0.id = ANY(%s)"
                params.append(sorted(within))
            member += ")"
        params += [literal, wanted]
        statement = (
            "WITH knn AS (SELECT v.hash, v.seq, v.embedding <=> %s::vector AS distance"
            f" FROM vectors_vec v{member} ORDER BY v.embedding <=> %s::vector LIMIT %s)"
            f" SELECT knn.distance, cv.pos, {_META_COLUMNS}, content.doc FROM knn"
            " JOIN content_vectors cv ON cv.hash = knn.hash AND cv.seq = knn.seq"
            " JOIN documents d ON d.hash = knn.hash AND d.active = 1"
            " JOIN content ON content.hash = d.hash"
        )
        where = []
        if collection:
            where.append("d.collection = %s")
            params.append(collection)
        if within is not None:
            where.append("d.id = ANY(%s)")
            params.append(sorted(within))
        if where:
            statement += " WHERE " + " AND ".join(where)
        statement += " ORDER BY knn.distance, d.id"
        with self.transaction(), self._conn() as conn:
            ef = max(self._ef_search, wanted)
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
            if collection or within is not None:
                conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
            rows = conn.execute(statement, params).fetchall()
        best: dict[tuple[str, str], VectorHit] = {}
        for row in rows:
            meta = _meta(row[2:10])
            key = (meta.collection, meta.path)
            if key in best:
                continue  # rows come nearest first: the first chunk seen is the best one
            best[key] = VectorHit(
                document=Document(meta=meta, body=str(row[10])),
                distance=float(row[0]),
                chunk_pos=int(row[1]),
            )
        return list(best.values())[:limit]

    def rebuild_vector_index(self) -> None:
        """Drop and rebuild the HNSW index (after a bulk load: one build beats many inserts)."""
        with self.transaction(), self._conn() as conn:
            conn.execute("DROP INDEX IF EXISTS idx_vectors_vec_hnsw")
            conn.execute(VECTORS_HNSW_DDL)

    # ------------------------------------------------------------------ llm cache

    def get(self, key: str) -> str | None:
        value = self._scalar("SELECT result FROM llm_cache WHERE hash = %s", (key,))
        return None if value is None else str(value)

    def put(self, key: str, value: str) -> None:
        """Best effort, as on SQLite: a cache entry that cannot be written is not cached."""
        try:
            with self._conn() as conn:
                conn.execute(
                    "INSERT INTO llm_cache (hash, result, created_at) VALUES (%s, %s, %s) "
                    "ON CONFLICT (hash) DO UPDATE SET result = excluded.result, "
                    "created_at = excluded.created_at",
                    (key, value, _now_iso()),
                )
                if random.random() < 0.01:
                    conn.execute(
                        "DELETE FROM llm_cache WHERE hash NOT IN (SELECT hash FROM llm_cache "
                        f"ORDER BY created_at DESC LIMIT {LLM_CACHE_KEEP})"
                    )
        except psycopg.OperationalError:
            if getattr(self._local, "conn", None) is not None:
                raise

    def clear(self) -> None:
        self._execute("DELETE FROM llm_cache")


# SQLite's LIKE folds ASCII letters only; PostgreSQL's lower() would fold every script.
_ASCII_LOWER = "translate({}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"


def _ascii_lower(text: str) -> str:
    return "".join(ch.lower() if ch.isascii() else ch for ch in text)


__all__ = ["PostgresIndex", "is_postgres_url", "redact", "split_schema"]


if TYPE_CHECKING:  # structural conformance, checked by mypy
    from domain.ports import (
        ChunkIndex,
        DocumentStore,
        ExtractionLedger,
        IndexMaintenance,
        LexicalIndex,
        LlmCache,
        MetadataIndex,
        NamespaceRegistry,
        SummaryStore,
        VectorIndex,
    )
    from domain.usecases.projmem import IndexFigures

    def _conforms(index: PostgresIndex) -> None:
        _store: DocumentStore = index
        _lex: LexicalIndex = index
        _vec: VectorIndex = index
        _cache: LlmCache = index
        _upkeep: IndexMaintenance = index
        _metadata: MetadataIndex = index
        _ledger: ExtractionLedger = index
        _chunks: ChunkIndex = index
        _names: NamespaceRegistry = index
        _figures: IndexFigures = index
        _summaries: SummaryStore = index
