"""`qmd index copy SRC DEST`: move a whole index between SQLite files and PostgreSQL URLs, in
any direction.

Rows are copied table by table, as stored (ids, hashes, timestamps and vectors unchanged); the
full-text rows are rebuilt on the destination by its own adapter (FTS5 there, tsvector here),
on PostgreSQL the HNSW index is built once after the vectors are loaded, and on SQLite the
vector prefilter's bits (`DERIVED_TABLES`) are quantized afresh. Every table the
source has is copied, empty or not. The destination must be empty, and it is complete or
untouched: a SQLite destination is written to a temporary file beside it and renamed into place
once every table's row count matches the source's; a PostgreSQL destination is written and
verified in one transaction (a schema this copy created is dropped again if it fails).

A table added to both schemas later is one more entry in `TABLES`.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from adapters.postgres.bulk import copy_rows
from adapters.postgres.schema import VECTORS_HNSW_DDL
from adapters.postgres.store import (
    PostgresIndex,
    drop_schema,
    fts_params,
    fts_row_sql,
    is_postgres_url,
    schema_exists,
)
from adapters.postgres.url import split_schema
from adapters.sqlite import vector_bits
from adapters.sqlite.chunks import CHUNKS_DDL, NAMESPACES_DDL, SUMMARIES_DDL
from adapters.sqlite.driver import dbapi
from adapters.sqlite.extraction import CACHE_DDL, STATE_DDL
from adapters.sqlite.memory import SCHEMA as MEMORY_SCHEMA
from adapters.sqlite.metadata import METADATA_DDL
from adapters.sqlite.schema import ensure_vec_table, vec_table_sql
from adapters.sqlite.store import SqliteIndex
from domain.errors import CONFLICT, UNAVAILABLE, QmdError

Index = SqliteIndex | PostgresIndex
BATCH = 2000
PROJMEM_DDL = (CHUNKS_DDL, NAMESPACES_DDL, SUMMARIES_DDL)  # SqliteChunkIndex makes all three


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, COPY kind: text | int4 | int8)
    order: str
    # the SQLite adapter creates this table on its first write (an index of the original's
    # has none): a missing table reads as empty, and the copy creates it on a SQLite dest
    sqlite_ddl: tuple[str, ...] = ()
    # rows kept: SQLite has no foreign keys, so rows of documents gone are left out
    where: str = ""
    # ids from a sequence (SQLite AUTOINCREMENT) that are never reused: the destination's
    # sequence continues past the source's, deleted ids included
    serial: bool = False


TABLES: tuple[Table, ...] = (
    Table("content", (("hash", "text"), ("doc", "text"), ("created_at", "text")), "hash"),
    Table(
        "documents",
        (
            ("id", "int8"),
            ("collection", "text"),
            ("path", "text"),
            ("title", "text"),
            ("hash", "text"),
            ("created_at", "text"),
            ("modified_at", "text"),
            ("active", "int4"),
        ),
        "id",
    ),
    Table(
        "store_collections",
        (
            ("name", "text"),
            ("path", "text"),
            ("pattern", "text"),
            ("ignore_patterns", "text"),
            ("include_by_default", "int4"),
            ("update_command", "text"),
            ("context", "text"),
        ),
        "{order}",
    ),
    Table("store_config", (("key", "text"), ("value", "text")), "key"),
    Table("llm_cache", (("hash", "text"), ("result", "text"), ("created_at", "text")), "hash"),
    Table(
        "content_vectors",
        (
            ("hash", "text"),
            ("seq", "int4"),
            ("pos", "int4"),
            ("model", "text"),
            ("embed_fingerprint", "text"),
            ("total_chunks", "int4"),
            ("embedded_at", "text"),
        ),
        "hash, seq",
    ),
    Table(
        "py_document_metadata",
        (("doc_id", "int8"), ("metadata", "text")),
        "doc_id",
        sqlite_ddl=(METADATA_DDL,),
        where="doc_id IN (SELECT id FROM documents)",
    ),
    Table(
        "extraction_cache",
        (
            ("source_hash", "text"),
            ("status", "text"),
            ("text_hash", "text"),
            ("title", "text"),
            ("metadata", "text"),
            ("pages", "int4"),
            ("empty_pages", "text"),
            ("reason", "text"),
            ("detail", "text"),
        ),
        "source_hash",
        sqlite_ddl=(CACHE_DDL, STATE_DDL),  # the SQLite ledger expects both or neither
    ),
    Table(
        "extraction_state",
        (
            ("collection", "text"),
            ("path", "text"),
            ("status", "text"),
            ("reason", "text"),
            ("detail", "text"),
            ("source_hash", "text"),
            ("pages", "int4"),
            ("empty_pages", "text"),
            ("extracted_at", "text"),
        ),
        "collection, path",
        sqlite_ddl=(CACHE_DDL, STATE_DDL),
    ),
    Table(
        "memory_topics",
        (("name", "text"), ("vector", "bytea"), ("created_at", "text")),
        "name",
        sqlite_ddl=(MEMORY_SCHEMA,),
    ),
    Table(
        "memory_records",
        (
            ("id", "text"),
            ("kind", "text"),
            ("topic", "text"),
            ("path", "text"),
            ("file_hash", "text"),
            ("record", "text"),
            ("vector", "bytea"),
        ),
        "id",
        sqlite_ddl=(MEMORY_SCHEMA,),
    ),
    Table(
        "pyqmd_chunks",
        (
            ("id", "int8"),
            ("doc_id", "int8"),
            ("hash", "text"),
            ("seq", "int4"),
            ("heading_path", "text"),
            ("start_line", "int4"),
            ("end_line", "int4"),
            ("text", "text"),
        ),
        "id",
        sqlite_ddl=PROJMEM_DDL,
        where="doc_id IN (SELECT id FROM documents)",
        serial=True,
    ),
    Table(
        "pyqmd_namespaces",
        (("id", "int8"), ("name", "text")),
        "id",
        sqlite_ddl=PROJMEM_DDL,
        serial=True,
    ),
    Table(
        "pyqmd_session_summaries",
        (("session_id", "text"), ("summary_json", "text"), ("updated_at", "text")),
        "session_id",
        sqlite_ddl=PROJMEM_DDL,
    ),
)
PROJMEM_TABLES = ("pyqmd_chunks", "pyqmd_namespaces", "pyqmd_session_summaries")

# File stamps describe this machine's files (REQ-INDEX-NOOP-001): never copied, so the first
# update after a copy reads every file once.
LOCAL_TABLES = ("py_file_stamps",)

# Derived from other tables by the destination's adapter: never copied, rebuilt there.
DERIVED_TABLES = (vector_bits.BITS_TABLE,)

# Written by each adapter for itself when it creates an index: never copied over.
LOCAL_CONFIG_KEYS = ("fts_cjk_normalized_version", vector_bits.SIGNATURE_KEY)


def open_any(location: str) -> Index:
    if is_postgres_url(location):
        return PostgresIndex.open(location)
    return SqliteIndex.open(location)


# ------------------------------------------------------------------------------------ reading


def _order(table: Table, index: Index) -> str:
    if table.order == "{order}":
        return "ord" if isinstance(index, PostgresIndex) else "rowid"
    return table.order


def _rows(index: Index, statement: str) -> Iterator[tuple[Any, ...]]:
    if isinstance(index, SqliteIndex):
        yield from index.connection.raw.execute(statement)
        return
    with index.connection() as conn, conn.cursor(name="qmd_copy") as cur:
        cur.itersize = BATCH
        cur.execute(statement)
        yield from cur


def _exists(index: Index, table: str) -> bool:
    if isinstance(index, SqliteIndex):
        statement = f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{table}'"
    else:
        statement = (
            f"SELECT COUNT(*) FROM (SELECT to_regclass('{table}') AS t) r WHERE t IS NOT NULL"
        )
    return bool(next(iter(_rows(index, statement)))[0])


def _count(index: Index, table: str) -> int:
    if table == "vectors":
        if not has_vectors(index):
            return 0
        table = "vectors_vec"
    known = next((t for t in TABLES if t.name == table), None)
    if known is not None and known.sqlite_ddl and not _exists(index, table):
        return 0
    where = f" WHERE {known.where}" if known is not None and known.where else ""
    statement = f"SELECT COUNT(*) FROM {table}{where}"
    return int(next(iter(_rows(index, statement)))[0])


def has_vectors(index: Index) -> bool:
    if isinstance(index, SqliteIndex):
        return vec_table_sql(index.connection) is not None
    return index.has_vector_index()


def high_water(index: Index, table: Table) -> int:
    """The last id handed out for `table` (at least its largest id): 0 when none."""
    if not _exists(index, table.name):
        return 0
    largest = int(next(iter(_rows(index, f"SELECT COALESCE(MAX(id), 0) FROM {table.name}")))[0])
    if isinstance(index, SqliteIndex):
        statement = f"SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = '{table.name}'"
    else:
        statement = (
            f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {table.name}_id_seq"
        )
    return max(largest, int(next(iter(_rows(index, statement)))[0] or 0))


def read_table(index: Index, table: Table) -> Iterator[tuple[Any, ...]]:
    if table.sqlite_ddl and not _exists(index, table.name):
        return iter(())
    columns = ", ".join(name for name, _ in table.columns)
    where = f" WHERE {table.where}" if table.where else ""
    rows = _rows(
        index, f"SELECT {columns} FROM {table.name}{where} ORDER BY {_order(table, index)}"
    )
    if table.name == "store_config":
        return (row for row in rows if row[0] not in LOCAL_CONFIG_KEYS)
    return rows


def read_vectors(index: Index) -> Iterator[tuple[str, int, bytes]]:
    """(hash, seq, little-endian float32 bytes) of every stored vector."""
    if not has_vectors(index):
        return
    if isinstance(index, SqliteIndex):
        for key, blob in _rows(index, "SELECT hash_seq, embedding FROM vectors_vec"):
            digest, _, seq = str(key).rpartition("_")
            yield digest, int(seq), bytes(blob)
        return
    for digest, seq, values in _rows(
        index, "SELECT hash, seq, embedding::real[] FROM vectors_vec ORDER BY hash, seq"
    ):
        yield str(digest), int(seq), struct.pack(f"<{len(values)}f", *values)


# ------------------------------------------------------------------------------------ writing


def _write_sqlite(dest: SqliteIndex, source: Index, tick: Callable[[int], None]) -> None:
    conn = dest.connection
    with conn.transaction():
        for table in TABLES:
            # a table the source has is copied even when empty (a PostgreSQL index has them
            # all); one the source lacks (an index of the original's) stays absent
            if table.sqlite_ddl and _exists(source, table.name):
                for script in table.sqlite_ddl:  # not executescript: it would COMMIT
                    for statement in filter(str.strip, script.split(";")):
                        conn.execute(statement)
            elif table.sqlite_ddl:
                continue
            names = [name for name, _ in table.columns]
            insert = (
                f"INSERT OR REPLACE INTO {table.name} ({', '.join(names)}) "
                f"VALUES ({', '.join('?' * len(names))})"
            )
            batch: list[tuple[Any, ...]] = []
            for row in read_table(source, table):
                batch.append(tuple(row))
                if len(batch) >= BATCH:
                    conn.executemany(insert, batch)
                    tick(len(batch))
                    batch.clear()
            if batch:
                conn.executemany(insert, batch)
                tick(len(batch))
            last = high_water(source, table) if table.serial else 0
            if last:
                conn.execute(
                    "UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = ?",
                    (last, table.name),
                )
                conn.execute(
                    "INSERT INTO sqlite_sequence (name, seq) SELECT ?, ? WHERE NOT EXISTS "
                    "(SELECT 1 FROM sqlite_sequence WHERE name = ?)",
                    (table.name, last, table.name),
                )
        for (doc_id,) in conn.query("SELECT id FROM documents WHERE active = 1 ORDER BY id"):
            dest._write_fts(int(doc_id))
        dims = 0
        batch_vec: list[tuple[str, bytes]] = []
        for digest, seq, blob in read_vectors(source):
            if not dims:
                dims = len(blob) // 4
                ensure_vec_table(conn, dims)
            batch_vec.append((f"{digest}_{seq}", blob))
            if len(batch_vec) >= BATCH:
                conn.executemany(
                    "INSERT INTO vectors_vec (hash_seq, embedding) VALUES (?, ?)", batch_vec
                )
                tick(len(batch_vec))
                batch_vec.clear()
        if batch_vec:
            conn.executemany(
                "INSERT INTO vectors_vec (hash_seq, embedding) VALUES (?, ?)", batch_vec
            )
            tick(len(batch_vec))
        if dims:
            vector_bits.rebuild(conn, dims)
        _verify(source, dest)  # before COMMIT


def _counting(rows: Iterator[Any], tick: Callable[[int], None]) -> Iterator[Any]:
    done = 0
    for row in rows:
        yield row
        done += 1
        if done == BATCH:
            tick(done)
            done = 0
    tick(done)


def _write_postgres(dest: PostgresIndex, source: Index, tick: Callable[[int], None]) -> None:
    with dest.transaction(), dest.connection() as conn:
        for table in TABLES:
            copy_rows(conn, table.name, table.columns, _counting(read_table(source, table), tick))
        conn.execute(
            "SELECT setval(pg_get_serial_sequence('documents', 'id'), "
            "GREATEST((SELECT MAX(id) FROM documents), 1))"
        )
        for table in TABLES:
            last = high_water(source, table) if table.serial else 0
            if last:
                conn.execute(
                    "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", (table.name, last)
                )
        active = conn.execute(
            "SELECT d.id, d.collection, d.path, d.title, content.doc FROM documents d "
            "JOIN content ON content.hash = d.hash WHERE d.active = 1 ORDER BY d.id"
        ).fetchall()
        with conn.cursor() as cur:
            cur.executemany(fts_row_sql(), [fts_params(int(r[0]), *r[1:]) for r in active])
        vectors = read_vectors(source)
        first = next(vectors, None)
        if first is None:
            _verify(source, dest)
            return
        dest.ensure_vector_table(conn, len(first[2]) // 4)
        conn.execute("DROP INDEX IF EXISTS idx_vectors_vec_hnsw")

        def chained() -> Iterator[tuple[str, int, bytes]]:
            yield first
            yield from vectors

        copy_rows(
            conn,
            "vectors_vec",
            (("hash", "text"), ("seq", "int4"), ("embedding", "vector")),
            _counting(chained(), tick),
        )
        conn.execute(VECTORS_HNSW_DDL)
        _verify(source, dest)  # before COMMIT: a copy that does not add up leaves nothing


# ------------------------------------------------------------------------------------ the copy


COUNTED = (
    "documents",
    "content",
    "content_vectors",
    "vectors",
    "store_collections",
    "py_document_metadata",
    "extraction_cache",
    "extraction_state",
    "memory_topics",
    "memory_records",
    *PROJMEM_TABLES,
)


def counts(index: Index) -> dict[str, int]:
    return {name: _count(index, name) for name in COUNTED}


NOT_EMPTY = "the destination index is not empty; copy into a new file or an empty schema"


def _verify(source: Index, dest: Index) -> dict[str, int]:
    expected, found = counts(source), counts(dest)
    if found != expected:
        raise QmdError(
            CONFLICT, f"verification failed: source has {expected}, destination has {found}"
        )
    return found


def copy_index(
    source: Index, dest: Index, progress: Callable[[int, int], None] | None = None
) -> dict[str, int]:
    """Copy every row of `source` into the empty `dest`, in one transaction that commits only
    when every count matches; returns the verified counts. `copy_to` adds the temporary
    file and the schema clean-up around this."""
    if _count(dest, "documents") or _count(dest, "content"):
        raise QmdError(CONFLICT, NOT_EMPTY)
    with _snapshot(source):
        return _copy_rows(source, dest, progress)


@contextmanager
def _snapshot(source: Index) -> Iterator[None]:
    """Every read of the source in one snapshot: a writer running beside the copy cannot make
    its tables disagree with each other (documents without their content) or with the counts
    the copy is verified against."""
    if isinstance(source, SqliteIndex):
        with source.connection.transaction(immediate=False):  # a read transaction (WAL)
            yield
        return
    with source.transaction(), source.connection() as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def _copy_rows(
    source: Index, dest: Index, progress: Callable[[int, int], None] | None
) -> dict[str, int]:
    expected = counts(source)
    total = sum(_count(source, t.name) for t in TABLES) + expected["vectors"]
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    if isinstance(dest, SqliteIndex):
        _write_sqlite(dest, source, tick)
    else:
        _write_postgres(dest, source, tick)
    return _verify(source, dest)


def _sqlite_file_is_empty(path: str) -> bool:
    """Whether the file at `path` may be replaced: no file, an empty one, or an index with no
    document and no content. Read-only: nothing is created or migrated."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return True
    try:
        conn = dbapi.connect(f"file:{path}?mode=ro", uri=True)
        try:
            for table in ("documents", "content"):
                exists = conn.execute(
                    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
                    (table,),
                ).fetchone()[0]
                if exists and conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]:
                    return False
        finally:
            conn.close()
    except dbapi.DatabaseError as error:
        raise QmdError(CONFLICT, f"{path} is not an empty index ({error})") from None
    return True


def _copy_to_sqlite_file(
    source: Index, path: str, progress: Callable[[int, int], None] | None
) -> dict[str, int]:
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise QmdError(CONFLICT, f"{path} is a folder; name the index file to write")
    if not _sqlite_file_is_empty(path):
        raise QmdError(CONFLICT, NOT_EMPTY)
    folder = os.path.dirname(path)
    # beside the destination, so the final rename stays on one file system
    handle, temporary = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.", suffix=".copying", dir=folder
    )
    os.close(handle)
    try:
        dest = SqliteIndex.open(temporary)
        try:
            found = copy_index(source, dest, progress)
        finally:
            dest.close()  # the last connection: SQLite folds the WAL back into the file
        os.replace(temporary, path)
    except BaseException:
        for leftover in (temporary, f"{temporary}-wal", f"{temporary}-shm"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        raise
    for stale in (f"{path}-wal", f"{path}-shm"):  # of the empty index replaced, if any
        if os.path.exists(stale):
            os.unlink(stale)
    return found


def _copy_to_postgres(
    source: Index, url: str, progress: Callable[[int, int], None] | None
) -> dict[str, int]:
    created = split_schema(url)[1] is not None and not schema_exists(url)
    try:
        dest = PostgresIndex.open(url)
        try:
            with dest.index_lock("update", False) as held:
                if not held:
                    raise QmdError(
                        CONFLICT, "the destination index is being written by another process"
                    )
                return copy_index(source, dest, progress)
        finally:
            dest.close()
    except BaseException:
        if created:
            drop_schema(url)  # made by this copy: leave the database as it was
        raise


def copy_to(
    source: Index, dest: str, progress: Callable[[int, int], None] | None = None
) -> dict[str, int]:
    """Copy `source` into the index at `dest` (a SQLite file or a PostgreSQL URL), which is
    either complete and verified afterwards or as it was before."""
    try:
        if is_postgres_url(dest):
            return _copy_to_postgres(source, dest, progress)
        return _copy_to_sqlite_file(source, dest, progress)
    except (dbapi.DatabaseError, psycopg.Error) as error:
        raise QmdError(
            UNAVAILABLE,
            f"the copy failed and the destination was left as it was: {error}",
        ) from error


def describe(found: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{count} {name}" for name, count in found)
