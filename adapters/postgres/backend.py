"""The PostgreSQL backend: one schema of a database, every port on one connection pool
(`open_backend`); the driver is imported only when such an index is opened."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager

import psycopg

from adapters.postgres.connection import drop_schema, schema_lock, unavailable
from adapters.postgres.dump import PostgresDump
from adapters.postgres.staging import (
    COPY_LABEL,
    COPY_LOCK,
    create_staged,
    staging_leftovers,
    staging_state,
)
from adapters.postgres.store import PostgresIndex
from adapters.storage.backend import Backend, IndexLock
from domain.errors import CONFLICT, UNAVAILABLE, QmdError
from domain.ports import MemoryRows

BUSY = "the destination index is being written by another process"

__all__ = ["open_backend", "staging_leftovers"]


def _advisory_lock(index: PostgresIndex) -> IndexLock:
    @contextmanager
    def lock(name: str, wait: bool) -> Iterator[bool]:
        with index.index_lock(name, wait) as held:
            yield held

    return lock


def open_backend(
    location: str, env: Mapping[str, str] | None = None, *, staged: bool = False
) -> Backend:
    """The index in the URL's `?schema=` (made when missing). `staged`: an empty index that
    this process holds the `update` lock of, from before it looks at the schema until `close`
    (REQ-INDEX-COPY-LOCK-001); a schema made by this open, or an empty one a killed copy made,
    is dropped again on `close` unless the copy's rows were committed."""
    stack = ExitStack()
    try:
        created = staged and _stage(location, stack)
    except psycopg.Error as exc:
        stack.close()
        raise QmdError(UNAVAILABLE, unavailable(location, exc)) from exc
    except BaseException:
        stack.close()
        raise
    try:
        index = PostgresIndex.open(location, env)
    except BaseException:
        if created:
            drop_schema(location)
        stack.close()
        raise
    dump = PostgresDump(index, staged, created)
    close = _closing(dump, stack)

    def memory() -> MemoryRows:
        return index

    return Backend(
        name="postgresql",
        index=index,
        chunks=index,
        ledger=index,
        memory=memory,
        stamps=index,
        lock=_advisory_lock(index),
        lock_holder=index.lock_holder,
        interrupt=index.interrupt,
        size=index.size_bytes,
        dump=dump,
        errors=(psycopg.Error,),
        close=close,
        replaced=lambda: False,  # a copy writes into the schema in place, never beside it
    )


def _stage(location: str, stack: ExitStack) -> bool:
    """Take the destination's `update` lock (refused at once, naming its holder, when another
    process writes it), then make its schema if missing; whether this copy may drop the
    schema again (it made it, or a killed copy did and left it empty)."""
    holder = stack.enter_context(schema_lock(location, COPY_LOCK, COPY_LABEL))
    if holder is not None:
        raise QmdError(CONFLICT, f"{BUSY} ({holder}); nothing was copied")
    state = staging_state(location)
    if state == "absent":
        return create_staged(location)
    return state == "leftover"


def _closing(dump: PostgresDump, stack: ExitStack) -> Callable[[], None]:
    def close() -> None:
        try:
            dump.close()  # under the lock: a schema dropped here is not one another copy made
        finally:
            stack.close()

    return close
