"""Opening SQLite connections the way the original QMD does.

The driver is `pysqlite3` (a current SQLite with extension loading) when installed, else the
standard library's `sqlite3`. sqlite-vec is loaded when the driver can load extensions; without
it the index still works for everything but vectors (`Connection.vec_available` is False).

Connections run in autocommit mode (`isolation_level=None`); callers group writes with
`transaction()`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from importlib.machinery import PathFinder
from types import ModuleType
from typing import Any, cast

DEFAULT_BUSY_TIMEOUT_MS = 120_000
# FTS5's own rank function: lexical search ranks with it until qmd's is loaded
FTS5_RANK_FUNCTION = "bm25"


def _load_driver() -> ModuleType:
    try:
        import pysqlite3.dbapi2 as driver

        return cast(ModuleType, driver)
    except ImportError:  # pragma: no cover - depends on the platform
        import sqlite3  # the standard library's driver only when pysqlite3 is missing

        return sqlite3


dbapi: ModuleType = _load_driver()

# Every driver module exposes these exception classes; callers catch them through here.
DatabaseError: type[Exception] = dbapi.DatabaseError
OperationalError: type[Exception] = dbapi.OperationalError
IntegrityError: type[Exception] = dbapi.IntegrityError


# what a failed write kept, when the command cannot say more: only the failing transaction
# is rolled back, and a command may have committed steps before it (issue 33)
KEPT = (
    "The write that failed was rolled back; what was committed before it is kept. Free some "
    "space on that disk and run the command again."
)


def storage_failure(error: BaseException, path: str, kept: str = KEPT) -> str | None:
    """The user-facing message for SQLite failing to write `path` (disk full, I/O error),
    or None for any other error. SQLite has rolled the failing transaction back by then;
    `kept` says what the command had committed before it, and what to do next."""
    if not isinstance(error, DatabaseError):
        return None
    message = str(error)
    if "full" not in message and "disk I/O" not in message:
        return None
    return f"qmd: cannot write {path}: {message}. {kept}"


class Connection:
    """A thin wrapper over a DB-API connection that remembers whether sqlite-vec loaded."""

    def __init__(self, raw: Any, path: str, vec_available: bool, vec_error: str | None) -> None:
        self.raw = raw
        self.path = path
        self.vec_available = vec_available
        self.vec_error = vec_error
        self._depth = 0
        self._lock = threading.RLock()
        # names in sqlite_master as the one-statement schema probe on open found them
        # (adapters/sqlite/schema.py); empty until then. Table owners skip their DDL for a
        # name listed here.
        self.schema_names: frozenset[str] = frozenset()
        # the FTS5 rank function lexical search calls: qmd's once `load_rank_function` has
        # loaded it (adapters/sqlite/rank_ext.py), else FTS5's own, which gives the same scores
        self.rank_function = FTS5_RANK_FUNCTION
        self.rank_error: str | None = "not loaded yet"
        self._rank_tried = False
        self._rank_lock = threading.Lock()  # not the transaction lock: never waits for a writer

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.raw.execute(sql, params)

    def load_rank_function(self) -> None:
        """Load qmd's rank function into this connection, once (REQ-SEARCH-RANKCACHE-001):
        `rank_function` then names it, or `rank_error` says why lexical search keeps FTS5's
        `bm25`. Not done on open: its set-up (a statement and a library load) only pays off
        where a connection ranks more than once, and a one-shot CLI search mostly ranks once."""
        with self._rank_lock:
            if self._rank_tried:
                return
            self._rank_tried = True
            if not hasattr(self.raw, "enable_load_extension"):
                self.rank_error = "the SQLite driver cannot load extensions"
                return
            from adapters.sqlite import rank_ext  # not on open: a one-shot search never needs it

            try:
                self.raw.enable_load_extension(True)
                try:
                    self.rank_error = rank_ext.load(self.raw)
                finally:
                    self.raw.enable_load_extension(False)
            except Exception as exc:  # the driver refused extension loading
                self.rank_error = f"the SQLite driver cannot load extensions ({exc})"
            if self.rank_error is None:
                self.rank_function = rank_ext.RANK_FUNCTION

    def executemany(self, sql: str, rows: Any) -> Any:
        return self.raw.executemany(sql, rows)

    def executescript(self, sql: str) -> None:
        self.raw.executescript(sql)

    def query(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        return cast(list[tuple[Any, ...]], self.raw.execute(sql, params).fetchall())

    def scalar(self, sql: str, params: Any = ()) -> Any:
        row = self.raw.execute(sql, params).fetchone()
        return None if row is None else row[0]

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.in_transaction)

    @property
    def transaction_depth(self) -> int:
        """How many `transaction()` calls are open (1: only the innermost, which began it)."""
        return self._depth

    @contextmanager
    def transaction(self, immediate: bool = True) -> Iterator[None]:
        """BEGIN [IMMEDIATE] … COMMIT, rolled back on error; nested calls join the outer one.

        Held under a re-entrant lock, so threads sharing the connection take turns.
        """
        with self._lock, self._transaction(immediate):
            yield

    @contextmanager
    def _transaction(self, immediate: bool) -> Iterator[None]:
        if self._depth > 0 or self.raw.in_transaction:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self.raw.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            # SQLite has already rolled back after some errors (SQLITE_FULL, SQLITE_IOERR):
            # a second ROLLBACK would fail and hide the error that matters.
            if self.raw.in_transaction:
                with suppress(Exception):
                    self.raw.execute("ROLLBACK")
            raise
        self._depth = 0
        self.raw.execute("COMMIT")

    def close(self) -> None:
        self.raw.close()


class ConnectionPart:
    """A part of the index that works on the index file's one connection: `SqliteIndex` is
    assembled from such parts (adapters/sqlite/store.py) as `PostgresIndex` is from parts over
    `PgConnections`. The statements both backends share (adapters/storage/sql_*.py) are
    written with SQLite's `?` placeholders, so they run here as written."""

    _conn: Connection

    def _select(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.query(statement, params)

    def _write(self, statement: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(statement, params)


def busy_timeout_ms(env: Mapping[str, str] | None = None) -> int:
    """`QMD_SQLITE_BUSY_TIMEOUT` (milliseconds, >= 0), else 120000."""
    raw = (os.environ if env is None else env).get("QMD_SQLITE_BUSY_TIMEOUT")
    if raw is None or raw.strip() == "":
        return DEFAULT_BUSY_TIMEOUT_MS
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_BUSY_TIMEOUT_MS
    if value != value or value < 0 or value == float("inf"):
        return DEFAULT_BUSY_TIMEOUT_MS
    return int(value)


def sqlite_vec_library() -> str | None:
    """Path of the sqlite-vec loadable library, found without importing `sqlite_vec`.

    Importing the package pulls in numpy (about half a second), which every CLI call and
    every MCP server start would pay; the extension itself is all we load.
    """
    # the path finder alone: `importlib.util` costs a cold start more than the lookup does
    spec = PathFinder.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "vec0")


def _load_sqlite_vec(raw: Any) -> tuple[bool, str | None]:
    library = sqlite_vec_library()
    if library is None:
        return False, "sqlite-vec is not installed"
    if not hasattr(raw, "enable_load_extension"):
        return False, "the SQLite driver cannot load extensions"
    try:
        raw.enable_load_extension(True)
        try:
            # a library that loads has run its init and registered vec0; no query needed
            raw.load_extension(library)
        finally:
            raw.enable_load_extension(False)
    except Exception as exc:
        return False, f"sqlite-vec failed to load ({exc})"
    return True, None


def _is_wal_file(target: str) -> bool:
    """Whether the file's header already says WAL (bytes 18 and 19 are 2): the journal mode
    is stored in the file, so an index switched once needs no PRAGMA on every open."""
    try:
        with open(target, "rb") as handle:
            header = handle.read(20)
    except OSError:
        return False
    return (
        len(header) == 20 and header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"
    )


def _enable_wal(raw: Any, budget_ms: int) -> None:
    # Switching the journal mode needs a short exclusive lock that ignores busy_timeout.
    deadline = time.monotonic() + budget_ms / 1000
    attempt = 0
    while True:
        try:
            raw.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except dbapi.OperationalError as exc:
            message = str(exc).lower()
            busy = "locked" in message or "busy" in message
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(min(5 + attempt, 25) / 1000)
            attempt += 1


SQL_TRACE_VAR = "QMD_SQL_TRACE"


def _trace_statements(raw: Any, env: Mapping[str, str] | None) -> None:
    """`QMD_SQL_TRACE=FILE`: every statement this connection runs is appended to FILE, one a
    line (a debugging and measuring aid: the CLI's start-up budget counts statements)."""
    target = (os.environ if env is None else env).get(SQL_TRACE_VAR, "")
    if not target:
        return

    def record(statement: str) -> None:
        with open(target, "a", encoding="utf-8") as trace:
            trace.write(" ".join(statement.split()) + "\n")

    raw.set_trace_callback(record)


def connect(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Connection:
    """Open (creating parent folders) and configure a connection; `:memory:` is accepted."""
    target = os.fspath(path)
    if target != ":memory:" and not target.startswith("file:"):
        folder = os.path.dirname(os.path.expanduser(target))
        if folder:
            os.makedirs(folder, exist_ok=True)
    timeout = busy_timeout_ms(env)
    # the driver sets the busy timeout itself (sqlite3_busy_timeout): no PRAGMA to run
    raw = dbapi.connect(
        target, timeout=timeout / 1000, isolation_level=None, check_same_thread=False
    )
    _trace_statements(raw, env)
    vec_available, vec_error = _load_sqlite_vec(raw)
    if target != ":memory:" and not _is_wal_file(target):
        _enable_wal(raw, timeout)
    # WAL + NORMAL never corrupts; it only lets the last commits of a power cut roll back,
    # and it avoids one fsync per upsert (a connection setting, not stored in the file).
    raw.execute("PRAGMA synchronous = NORMAL")
    raw.execute("PRAGMA foreign_keys = ON")
    return Connection(raw, target, vec_available, vec_error)
