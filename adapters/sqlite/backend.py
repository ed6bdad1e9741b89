"""The SQLite backend: one index file, every port on one connection (`open_backend`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from adapters.deferred import deferred
from adapters.sqlite.driver import dbapi
from adapters.sqlite.driver import storage_failure as storage_failure
from adapters.sqlite.store import SqliteIndex
from adapters.storage.backend import Backend
from domain.errors import UNAVAILABLE, QmdError

if TYPE_CHECKING:
    from adapters.sqlite.dump import SqliteDump
    from adapters.storage.backend import ChunkTables, Leftover
    from domain.ports import ExtractionLedger, FileStampIndex, MemoryRows


def staging_leftovers(
    location: str, file_lock: Callable[[str], AbstractContextManager[bool]]
) -> Iterator[Leftover]:
    """What unfinished copies left beside `location` (adapters/sqlite/dump.py)."""
    from adapters.sqlite.dump import staging_leftovers as found

    return found(location, file_lock)


def open_backend(
    location: str, env: Mapping[str, str] | None = None, *, staged: bool = False
) -> Backend:
    """The index file at `location` (created when missing). `staged`: a new index in a
    temporary file beside `location`, renamed onto it by `dump.publish()`; refused when
    `location` holds an index with documents."""
    target: str | None = None
    path = location
    if staged:
        from adapters.sqlite.dump import stage

        target, path = stage(location)
    try:
        index = SqliteIndex.open(path, env)
    except (OSError, dbapi.DatabaseError) as error:
        if storage_failure(error, path) is not None:
            raise  # a full disk is said as such by the caller
        # a file that is no database, a folder, a path that cannot be created: the user's
        # INDEX_PATH or --index, not an internal error
        raise QmdError(
            UNAVAILABLE,
            f"qmd: cannot open the index {path}: {error}. INDEX_PATH (or --index) must "
            "name a QMD index file, or a place where one can be created.",
        ) from None
    conn = index.connection

    def rows() -> SqliteDump:
        from adapters.sqlite.dump import SqliteDump

        return SqliteDump(index, target)

    # only `qmd index copy` reads or writes the rows whole: an index opened in place closes
    # as its connection does, and its dump is built on use; a staged one is removed on close
    # unless published, which its dump does
    dump = rows() if staged else deferred(rows)
    close = dump.close if staged else index.close
    opened = _identity(path)

    def replaced() -> bool:
        return _identity(path) != opened

    # the ports besides the index itself are built, and their modules imported, on first use:
    # a search or a status never touches them (adapters/deferred.py)
    def chunks() -> ChunkTables:
        from adapters.sqlite.chunks import SqliteChunkIndex

        return SqliteChunkIndex(conn)

    def ledger() -> ExtractionLedger:
        from adapters.sqlite.extraction import SqliteExtractionLedger

        return SqliteExtractionLedger(conn)

    def stamps() -> FileStampIndex:
        from adapters.sqlite.stamps import SqliteFileStamps

        return SqliteFileStamps(conn)

    def memory() -> MemoryRows:
        from adapters.sqlite.memory import SqliteMemoryRows

        return SqliteMemoryRows(conn)

    def size() -> int:
        return os.path.getsize(path) if os.path.exists(path) else 0

    return Backend(
        name="sqlite",
        index=index,
        chunks=deferred(chunks),
        ledger=deferred(ledger),
        memory=memory,
        stamps=deferred(stamps),
        lock=None,  # the CLI's lock files beside the index file (adapters/cli/runtime.py)
        lock_holder=None,
        interrupt=conn.raw.interrupt,
        size=size,
        dump=dump,
        errors=(dbapi.DatabaseError,),
        close=close,
        replaced=replaced,
    )


def _identity(path: str) -> tuple[int, int] | None:
    """The file at `path` (device, inode); None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
