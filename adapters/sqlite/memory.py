"""The index part of seed 004's memory in a SQLite index: `memory_topics` and
`memory_records` (vectors as little-endian float32 blobs), created when the memory is first
opened. The files themselves are `adapters.fs.memory.MarkdownMemoryStore`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adapters.sqlite.driver import Connection, connect

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


class SqliteMemoryRows:
    """`MemoryRows` on a connection of its own to the index file (closed by `close`)."""

    def __init__(self, connection: Connection) -> None:
        self._db = connection
        self._db.executescript(SCHEMA)

    @classmethod
    def open(cls, db_path: str, env: Mapping[str, str] | None = None) -> SqliteMemoryRows:
        return cls(connect(db_path, env))

    def close(self) -> None:
        self._db.close()

    def memory_topics(self) -> list[tuple[str, bytes]]:
        rows = self._db.query("SELECT name, vector FROM memory_topics ORDER BY name")
        return [(str(name), bytes(blob)) for name, blob in rows]

    def put_memory_topic(self, name: str, vector: bytes) -> None:
        with self._db.transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO memory_topics (name, vector, created_at) "
                "VALUES (?, ?, datetime('now'))",
                (name, vector),
            )

    def memory_record(self, record_id: str) -> tuple[str, bytes] | None:
        rows = self._db.query(
            "SELECT record, vector FROM memory_records WHERE id = ?", (record_id,)
        )
        return (str(rows[0][0]), bytes(rows[0][1])) if rows else None

    def memory_records(self, topic: str | None, kind: str | None) -> list[tuple[str, bytes]]:
        sql = "SELECT record, vector FROM memory_records WHERE 1 = 1"
        params: list[str] = []
        if topic is not None:
            sql += " AND topic = ?"
            params.append(topic)
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        rows = self._db.query(sql + " ORDER BY id", params)
        return [(str(raw), bytes(blob)) for raw, blob in rows]

    def memory_path(self, record_id: str) -> str | None:
        rows = self._db.query("SELECT path FROM memory_records WHERE id = ?", (record_id,))
        return str(rows[0][0]) if rows else None

    def memory_files(self) -> list[tuple[str, str, str, bytes]]:
        rows = self._db.query("SELECT id, path, file_hash, vector FROM memory_records")
        return [(str(i), str(p), str(h), bytes(v)) for i, p, h, v in rows]

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
