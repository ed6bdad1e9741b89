"""`qmd index copy SRC DEST`: move a whole index between any two backends (SQLite files,
PostgreSQL URLs), in any direction.

Rows are copied table by table, as stored (ids, hashes, timestamps and vectors unchanged),
through each backend's `IndexDump` (adapters/storage/backend.py); what a backend derives from them
(full-text rows, vector indexes, the SQLite prefilter's bits) is rebuilt on the destination by
its own adapter. Every table the source has is copied, empty or not. The destination must be
empty, and it is complete or untouched: it is opened staged (`open_backend(..., staged=True)`:
a temporary file beside a SQLite path, a schema dropped again if this copy made it), written
and verified in one transaction, and published only once every table's row count matches the
source's.

A table added to every backend's schema later is one more entry in
`adapters.storage.backend.TABLES`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager

from adapters.cli.runtime import file_lock
from adapters.storage.backend import TABLES, Backend, IndexDump, Table
from adapters.storage.registry import kind_of, open_backend, staging_leftovers
from domain.errors import CONFLICT, UNAVAILABLE, QmdError

__all__ = [
    "TABLES",
    "Table",
    "copy_index",
    "copy_to",
    "counts",
    "describe",
    "try_file_lock",
]

PROJMEM_TABLES = ("pyqmd_chunks", "pyqmd_namespaces", "pyqmd_session_summaries")

# File stamps describe this machine's files (REQ-INDEX-NOOP-001): never copied, so the first
# update after a copy reads every file once.
LOCAL_TABLES = ("py_file_stamps",)

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

NOT_EMPTY = "the destination index is not empty; copy into a new file or an empty schema"
BUSY = "the destination index is being written by another process"
# the lock every writer of an index takes (`collection add`, `update`: ADR 0047)
COPY_LOCK = "update"


def _count(dump: IndexDump, table: str) -> int:
    if table == "vectors":
        if not dump.has_vectors():
            return 0
        table = "vectors_vec"
    known = next((t for t in TABLES if t.name == table), None)
    if known is not None and known.on_demand and not dump.has_table(table):
        return 0
    where = f" WHERE {known.where}" if known is not None and known.where else ""
    return int(next(iter(dump.select(f"SELECT COUNT(*) FROM {table}{where}")))[0])


def counts(index: Backend) -> dict[str, int]:
    return {name: _count(index.dump, name) for name in COUNTED}


def _verify(source: Backend, dest: Backend) -> dict[str, int]:
    expected, found = counts(source), counts(dest)
    if found != expected:
        raise QmdError(
            CONFLICT, f"verification failed: source has {expected}, destination has {found}"
        )
    return found


def copy_index(
    source: Backend, dest: Backend, progress: Callable[[int, int], None] | None = None
) -> dict[str, int]:
    """Copy every row of `source` into the empty `dest`, in one transaction that commits only
    when every count matches; returns the verified counts. `copy_to` adds the staging (a
    temporary file, a schema clean-up) around this."""
    if _count(dest.dump, "documents") or _count(dest.dump, "content"):
        raise QmdError(CONFLICT, NOT_EMPTY)
    # every read of the source in one snapshot: a writer running beside the copy cannot make
    # its tables disagree with each other or with the counts the copy is verified against
    with source.dump.snapshot():
        expected = counts(source)
        total = sum(_count(source.dump, t.name) for t in TABLES) + expected["vectors"]
        done = 0

        def tick(n: int) -> None:
            nonlocal done
            done += n
            if progress is not None:
                progress(done, total)

        def verify() -> None:
            _verify(source, dest)

        dest.dump.load(source.dump, TABLES, tick, verify)
        return _verify(source, dest)


def copy_to(
    source: Backend, dest: str, progress: Callable[[int, int], None] | None = None
) -> dict[str, int]:
    """Copy `source` into the index at `dest` (a SQLite file or a database URL), which is
    either complete and verified afterwards or as it was before. The destination's writers'
    lock is held from before its emptiness is checked until it is published
    (REQ-INDEX-COPY-LOCK-001): a file's lock file here, a database's own lock by its backend."""
    with ExitStack() as held:
        if kind_of(dest).embedded:
            _lock_destination_file(held, dest)
            for leftover in staging_leftovers(dest, _only(dest)):  # REQ-INDEX-COPY-STALE-001
                leftover.remove()
        return _copy_staged(source, dest, progress)


def _copy_staged(
    source: Backend, dest: str, progress: Callable[[int, int], None] | None
) -> dict[str, int]:
    target: Backend | None = None
    try:
        target = open_backend(dest, staged=True)
        try:
            found = copy_index(source, target, progress)
            target.dump.publish()
        finally:
            target.close()
        return found
    except Exception as error:
        if isinstance(error, QmdError) or not isinstance(error, _storage_errors(source, target)):
            raise
        raise QmdError(
            UNAVAILABLE,
            f"the copy failed and the destination was left as it was: {error}",
        ) from error


def _lock_destination_file(held: ExitStack, dest: str) -> None:
    locked, holder = held.enter_context(file_lock(dest, COPY_LOCK, wait=False))
    if not locked:
        raise QmdError(CONFLICT, f"{BUSY} ({holder}); nothing was copied")


def _only(dest: str) -> Callable[[str], AbstractContextManager[bool]]:
    """The lock test for cleaning up before a copy: this process holds `dest`'s lock, and
    leaves every other index's staging files alone."""

    @contextmanager
    def lock(path: str) -> Iterator[bool]:
        yield os.path.abspath(path) == os.path.abspath(dest)

    return lock


def try_file_lock(path: str) -> AbstractContextManager[bool]:
    """Whether the writers' lock of the index file `path` is free, held for the block (for
    `staging_leftovers`: a copy holds it as long as its staging file exists)."""

    @contextmanager
    def lock() -> Iterator[bool]:
        with file_lock(path, COPY_LOCK, wait=False) as (locked, _holder):
            yield locked

    return lock()


def _storage_errors(source: Backend, target: Backend | None) -> tuple[type[Exception], ...]:
    return source.errors + (target.errors if target is not None else ())


def describe(found: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{count} {name}" for name, count in found)
