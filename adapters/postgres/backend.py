"""The PostgreSQL backend: one schema of a database, every port on one connection pool
(`open_backend`); the driver is imported only when such an index is opened."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager

import psycopg

from adapters.backend import Backend, IndexLock
from adapters.postgres.connection import drop_schema, schema_exists, unavailable
from adapters.postgres.dump import PostgresDump
from adapters.postgres.store import PostgresIndex
from adapters.postgres.url import split_schema
from domain.errors import CONFLICT, UNAVAILABLE, QmdError
from domain.ports import MemoryRows

BUSY = "the destination index is being written by another process"


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
    this process holds the `update` lock of until `close`; a schema made by this open is
    dropped again on `close` unless `dump.publish()` came first."""
    try:
        created = staged and split_schema(location)[1] is not None and not schema_exists(location)
    except psycopg.Error as exc:
        raise QmdError(UNAVAILABLE, unavailable(location, exc)) from exc
    try:
        index = PostgresIndex.open(location, env)
    except BaseException:
        if created:
            drop_schema(location)
        raise
    dump = PostgresDump(index, staged, created)
    close: Callable[[], None] = dump.close
    if staged:
        close = _holding_update_lock(index, dump)

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
    )


def _holding_update_lock(index: PostgresIndex, dump: PostgresDump) -> Callable[[], None]:
    """Take the destination's `update` lock now (refused at once if another process writes
    it) and return the `close` that releases it, then closes the dump."""
    stack = ExitStack()
    stack.callback(dump.close)
    try:
        held = stack.enter_context(index.index_lock("update", False))
    except BaseException:
        stack.close()
        raise
    if not held:
        stack.close()
        raise QmdError(CONFLICT, BUSY)
    return stack.close
