"""The PostgreSQL index's plumbing: the connection pool of one schema, transactions pinned to a
thread, advisory locks between processes (docs/decisions/0043), and the schema probes every
part of the store asks."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from adapters.postgres.schema import migrate
from adapters.postgres.url import split_schema
from adapters.redaction import redact
from domain.errors import UNAVAILABLE, QmdError

DEFAULT_EF_SEARCH = 100


class PostgresError(QmdError):
    pass


def pyformat(statement: str) -> str:
    """A statement the stores share (adapters/storage/sql_*.py), written with SQLite's `?`
    placeholders, in psycopg's `%s` style (a literal `%` doubled so it stays one)."""
    return statement.replace("%", "%%").replace("?", "%s")


def _holder_label(lock: str) -> str:
    """`pid N on HOST: qmd LOCK` (PostgreSQL keeps 63 bytes of an application_name)."""
    return f"pid {os.getpid()} on {socket.gethostname()}: qmd {lock}"[:63]


def lock_key(name: str, schema: str | None) -> str:
    """The text whose `hashtext` is the advisory lock `name` of the index in `schema`."""
    return f"qmd-{name}:{schema or ''}"


# who holds an advisory lock (two parameters: its key twice); pg_advisory_lock(bigint) shows
# in pg_locks as two 32-bit halves, objsubid 1
HOLDER_SQL = (
    "SELECT a.application_name FROM pg_locks l "
    "JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND l.classid = ((hashtext(%s)::bigint >> 32) & 4294967295)::oid "
    "AND l.objid = (hashtext(%s)::bigint & 4294967295)::oid LIMIT 1"
)


@contextmanager
def schema_lock(url: str, name: str, label: str) -> Iterator[str | None]:
    """Try to take the advisory lock `name` of the URL's schema on a connection of its own,
    without waiting and without opening (or creating) the schema: yields None while it is
    held, else who holds it (or a phrase saying nobody said). `label` names this process's
    work for another process's refusal (`pid N on HOST: qmd LABEL`)."""
    conninfo, schema = split_schema(url)
    key = lock_key(name, schema)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        got = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()
        if not (got and got[0]):
            row = conn.execute(HOLDER_SQL, (key, key)).fetchone()
            yield str(row[0]) if row and row[0] else "a process that did not say which"
            return
        conn.execute("SELECT set_config('application_name', %s, false)", (_holder_label(label),))
        try:
            yield None
        finally:
            with suppress(psycopg.Error):  # the server releases it with the session anyway
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))


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


def unavailable(url: str, error: BaseException) -> str:
    """Why the index at `url` cannot be opened, without its secrets: libpq's own message can
    quote what it could not read of the URL (REQ-SEC-SECRET-001)."""
    return f"cannot open the PostgreSQL index {redact(url)}: {redact(str(error), url)}"


class PgConnections:
    """One schema's pool (`?schema=` in the URL, else the user's default), migrated on open.

    Every public method of the parts built on it is one unit of work on a pooled connection,
    committed when it returns; `transaction()` pins one connection to the calling thread."""

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
            # a URL libpq cannot read fails here, at once, instead of in the pool's retries
            # for its 30 s (whose log lines would quote libpq's complaint)
            conninfo_to_dict(conninfo)
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
            raise QmdError(UNAVAILABLE, unavailable(url, exc)) from exc

    @property
    def path(self) -> str:
        return redact(self.url)

    @property
    def vec_available(self) -> bool:
        return True  # the schema migration created (or found) the vector extension

    @property
    def lexical_ranking(self) -> str:
        return "FTS5's bm25 over tsvectors, Porter stems (adapters/postgres/bm25.py)"

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
        key = lock_key(name, self.schema)
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
        row = self._scalar(HOLDER_SQL, (lock_key(name, self.schema),) * 2)
        return str(row) if row else None

    def lock_is_free(self, name: str) -> bool:
        key = lock_key(name, self.schema)
        with self._conn() as conn:
            row = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()
            if row and row[0]:
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
                return True
        return False

    def close(self) -> None:
        self._pool.close()

    def has_vector_index(self) -> bool:
        return self._scalar("SELECT to_regclass('vectors_vec')") is not None

    def vector_dimensions(self) -> int | None:
        value = self._scalar(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('vectors_vec') "
            "AND attname = 'embedding'"
        )
        return None if value is None or int(value) <= 0 else int(value)
