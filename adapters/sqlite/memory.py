"""The index part of seed 004's memory in a SQLite index: `memory_topics` and
`memory_records` (vectors as little-endian float32 blobs), created when the memory is first
opened. The files themselves are `adapters.fs.memory.MarkdownMemoryStore`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapters.sqlite.driver import Connection, connect
from adapters.storage.sql_memory import MemoryRowReads

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_topics (
    name TEXT PRIMARY KEY,
    vector BLOB NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_records (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    topic TEXT NOT NULL,
    path TEXT NOT NULL,
    file_hash TEXT NOT NULL,
    record TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_memory_records_topic ON memory_records(topic, kind);
"""


class SqliteMemoryRows(MemoryRowReads):
    """`MemoryRows` on a connection of its own to the index file (closed by `close`)."""

    def __init__(self, connection: Connection) -> None:
        self._db = connection
        self._db.executescript(SCHEMA)

    @classmethod
    def open(cls, db_path: str, env: Mapping[str, str] | None = None) -> SqliteMemoryRows:
        return cls(connect(db_path, env))

    def close(self) -> None:
        self._db.close()

    def _memory_rows(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._db.query(statement, params)

    def put_memory_topic(self, name: str, vector: bytes) -> None:
        with self._db.transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO memory_topics (name, vector, created_at) "
                "VALUES (?, ?, datetime('now'))",
                (name, vector),
            )

    def put_memory_records(
        self, rows: Sequence[tuple[str, str, str, str, str, str, bytes]]
    ) -> None:
        with self._db.transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO memory_records "
                "(id, kind, topic, path, file_hash, record, vector) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def sync_memory_records(
        self,
        gone: Sequence[str],
        paths: Mapping[str, str],
        refreshed: Sequence[tuple[str, str, str]],
    ) -> None:
        with self._db.transaction():
            self._db.executemany("DELETE FROM memory_records WHERE id = ?", [(i,) for i in gone])
            for record_id, relative in paths.items():
                self._db.execute(
                    "UPDATE memory_records SET path = ? WHERE id = ?", (relative, record_id)
                )
            self._db.executemany(
                "UPDATE memory_records SET file_hash = ?, record = ? WHERE id = ?", refreshed
            )
