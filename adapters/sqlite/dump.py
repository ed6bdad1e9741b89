"""The rows of a whole SQLite index for `qmd index copy` (`IndexDump`): read as stored, and
written into an empty index with the full-text rows rebuilt by this adapter (FTS5, CJK
spacing) and the vector prefilter's bits quantized afresh. A staged destination is a temporary
file beside the target, renamed into place by `publish` (complete or untouched)."""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from adapters.sqlite import vector_bits
from adapters.sqlite.driver import dbapi
from adapters.sqlite.schema import ensure_vec_table, vec_table_sql
from adapters.sqlite.store import SqliteIndex
from adapters.storage.backend import IndexDump, Leftover, Table
from adapters.storage.sql_dump import BATCH, TableReads
from domain.errors import CONFLICT, QmdError


def on_demand_ddl() -> dict[str, tuple[str, ...]]:
    """The scripts that make each on-demand table (`Table.on_demand`) as its adapter does.
    Built on use: the adapters' modules (the metadata one imports the filter code) are not
    needed to open an index (tests/e2e/test_cli_start.py)."""
    from adapters.sqlite.chunks import CHUNKS_DDL, NAMESPACES_DDL, SUMMARIES_DDL
    from adapters.sqlite.extraction import CACHE_DDL, STATE_DDL
    from adapters.sqlite.memory import SCHEMA as MEMORY_SCHEMA
    from adapters.sqlite.metadata import METADATA_DDL

    projmem = (CHUNKS_DDL, NAMESPACES_DDL, SUMMARIES_DDL)  # SqliteChunkIndex makes all three
    return {
        "py_document_metadata": (METADATA_DDL,),
        "extraction_cache": (CACHE_DDL, STATE_DDL),  # the SQLite ledger expects both or neither
        "extraction_state": (CACHE_DDL, STATE_DDL),
        "memory_topics": (MEMORY_SCHEMA,),
        "memory_records": (MEMORY_SCHEMA,),
        "pyqmd_chunks": projmem,
        "pyqmd_namespaces": projmem,
        "pyqmd_session_summaries": projmem,
    }


# Derived from other tables by this adapter: never copied, rebuilt on the destination.
DERIVED_TABLES = (vector_bits.BITS_TABLE,)
# Written by this adapter for itself when it creates an index: never copied over.
OWN_CONFIG_KEYS = ("fts_cjk_normalized_version", vector_bits.SIGNATURE_KEY)

NOT_EMPTY = "the destination index is not empty; copy into a new file or an empty schema"


def _file_is_empty(path: str) -> bool:
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


def stage(location: str) -> tuple[str, str]:
    """(target path, temporary file beside it) for a new index at `location`; refused when
    `location` is a folder or an index holding documents."""
    path = os.path.abspath(location)
    if os.path.isdir(path):
        raise QmdError(CONFLICT, f"{path} is a folder; name the index file to write")
    if not _file_is_empty(path):
        raise QmdError(CONFLICT, NOT_EMPTY)
    import tempfile  # a copy's destination only

    # beside the destination, so the final rename stays on one file system
    handle, temporary = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.", suffix=STAGING_SUFFIX, dir=os.path.dirname(path)
    )
    os.close(handle)
    return path, temporary


STAGING_SUFFIX = ".copying"
# `.NAME.RANDOM.copying` (mkstemp's RANDOM has no dot), and SQLite's -wal and -shm beside it
_STAGING_NAME = re.compile(r"^\.(?P<target>.+)\.[^.]+\.copying(?:-wal|-shm)?$")


def staging_leftovers(
    location: str, file_lock: Callable[[str], AbstractContextManager[bool]]
) -> Iterator[Leftover]:
    """The staging files in the folder of `location` whose copy is not running: a copy holds
    its destination's lock (`file_lock(target)` yields False then) as long as its file exists
    (REQ-INDEX-COPY-STALE-001)."""
    folder = os.path.dirname(os.path.abspath(location))
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    groups: dict[str, list[str]] = {}
    for name in names:
        found = _STAGING_NAME.match(name)
        if found is not None:
            stem = name.split(STAGING_SUFFIX)[0] + STAGING_SUFFIX
            groups.setdefault(stem, []).append(os.path.join(folder, name))
    for stem, files in groups.items():
        found = _STAGING_NAME.match(stem)
        assert found is not None
        target = os.path.join(folder, found.group("target"))
        with file_lock(target) as free:
            if not free:
                continue
        size = sum(os.path.getsize(f) for f in files if os.path.exists(f))
        yield Leftover(
            f"{os.path.join(folder, stem)} ({size} bytes): a `qmd index copy` into "
            f"{target} that did not finish",
            functools.partial(_remove_staging, target, files, file_lock),
        )


def _remove_staging(
    target: str, files: list[str], file_lock: Callable[[str], AbstractContextManager[bool]]
) -> bool:
    with file_lock(target) as free:
        if not free:
            return False
        for leftover in files:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
    return True


class SqliteDump(TableReads):
    """`IndexDump` of one open SQLite index (staged: a temporary file for `target`)."""

    own_config_keys: tuple[str, ...] = OWN_CONFIG_KEYS

    def __init__(self, index: SqliteIndex, target: str | None = None) -> None:
        self._index = index
        self._target = target
        self._published = False

    def select(self, statement: str) -> Iterator[tuple[Any, ...]]:
        yield from self._index.connection.raw.execute(statement)

    def _count_tables(self, name: str) -> str:
        return f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{name}'"

    def _sequence_value(self, table: str) -> str:
        return f"SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = '{table}'"

    def has_vectors(self) -> bool:
        return vec_table_sql(self._index.connection) is not None

    def vector_rows(self) -> Iterator[tuple[str, int, bytes]]:
        if not self.has_vectors():
            return
        for key, blob in self.select("SELECT hash_seq, embedding FROM vectors_vec"):
            digest, _, seq = str(key).rpartition("_")
            yield digest, int(seq), bytes(blob)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        with self._index.connection.transaction(immediate=False):  # a read transaction (WAL)
            yield

    def load(
        self,
        source: IndexDump,
        tables: Sequence[Table],
        tick: Callable[[int], None],
        verify: Callable[[], None],
    ) -> None:
        conn = self._index.connection
        skip = (*source.own_config_keys, *self.own_config_keys)
        made_by = on_demand_ddl()
        with conn.transaction():
            for table in tables:
                # a table the source has is copied even when empty (a PostgreSQL index has
                # them all); one the source lacks (an index of the original's) stays absent
                if table.on_demand and not source.has_table(table.name):
                    continue
                for script in made_by.get(table.name, ()):
                    for statement in filter(str.strip, script.split(";")):
                        conn.execute(statement)  # not executescript: it would COMMIT
                self._insert(table, source.read_table(table, skip), tick)
                last = source.high_water(table) if table.serial else 0
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
                self._index._write_fts(int(doc_id))
            self._load_vectors(source.vector_rows(), tick)
            verify()  # before COMMIT

    def _insert(
        self, table: Table, rows: Iterator[tuple[Any, ...]], tick: Callable[[int], None]
    ) -> None:
        names = [name for name, _ in table.columns]
        insert = (
            f"INSERT OR REPLACE INTO {table.name} ({', '.join(names)}) "
            f"VALUES ({', '.join('?' * len(names))})"
        )
        batch: list[tuple[Any, ...]] = []
        for row in rows:
            batch.append(tuple(row))
            if len(batch) >= BATCH:
                self._index.connection.executemany(insert, batch)
                tick(len(batch))
                batch.clear()
        if batch:
            self._index.connection.executemany(insert, batch)
            tick(len(batch))

    def _load_vectors(
        self, vectors: Iterator[tuple[str, int, bytes]], tick: Callable[[int], None]
    ) -> None:
        conn = self._index.connection
        insert = "INSERT INTO vectors_vec (hash_seq, embedding) VALUES (?, ?)"
        dims = 0
        batch: list[tuple[str, bytes]] = []
        for digest, seq, blob in vectors:
            if not dims:
                dims = len(blob) // 4
                ensure_vec_table(conn, dims)
            batch.append((f"{digest}_{seq}", blob))
            if len(batch) >= BATCH:
                conn.executemany(insert, batch)
                tick(len(batch))
                batch.clear()
        if batch:
            conn.executemany(insert, batch)
            tick(len(batch))
        if dims:
            vector_bits.rebuild(conn, dims)

    def publish(self) -> None:
        if self._target is None or self._published:
            return
        temporary = self._index.path
        self._index.close()  # the last connection: SQLite folds the WAL back into the file
        os.replace(temporary, self._target)
        self._published = True
        for stale in (f"{self._target}-wal", f"{self._target}-shm"):  # of an empty index
            if os.path.exists(stale):
                os.unlink(stale)

    def close(self) -> None:
        """Close the index; a staged one never published is removed with its WAL files."""
        if self._published:
            return
        self._index.close()
        if self._target is None:
            return
        temporary = self._index.path
        for leftover in (temporary, f"{temporary}-wal", f"{temporary}-shm"):
            if os.path.exists(leftover):
                os.unlink(leftover)
