"""Seed 004's memory rows on PostgreSQL (`MemoryRows`): topic and record vectors, as
`adapters.sqlite.memory` on SQLite."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapters.postgres.connection import PgConnections, pyformat
from adapters.storage.sql_memory import MemoryRowReads


class PgMemoryRows(MemoryRowReads, PgConnections):
    """MemoryRows over the pool."""

    _BYTEWISE = ' COLLATE "C"'

    def _memory_rows(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._query(pyformat(statement), params)

    def put_memory_topic(self, name: str, vector: bytes) -> None:
        self._execute(
            "INSERT INTO memory_topics (name, vector, created_at) VALUES (%s, %s, "
            "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')) "
            "ON CONFLICT (name) DO UPDATE SET vector = excluded.vector, "
            "created_at = excluded.created_at",
            (name, vector),
        )

    def put_memory_records(
        self, rows: Sequence[tuple[str, str, str, str, str, str, bytes]]
    ) -> None:
        if not rows:
            return
        with self.transaction(), self._conn() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_records (id, kind, topic, path, file_hash, record, vector) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
                "kind = excluded.kind, topic = excluded.topic, path = excluded.path, "
                "file_hash = excluded.file_hash, record = excluded.record, "
                "vector = excluded.vector",
                list(rows),
            )

    def sync_memory_records(
        self,
        gone: Sequence[str],
        paths: Mapping[str, str],
        refreshed: Sequence[tuple[str, str, str]],
    ) -> None:
        with self.transaction(), self._conn() as conn:
            if gone:
                conn.execute("DELETE FROM memory_records WHERE id = ANY(%s)", (list(gone),))
            with conn.cursor() as cur:
                if paths:
                    cur.executemany(
                        "UPDATE memory_records SET path = %s WHERE id = %s AND path <> %s",
                        [(path, record_id, path) for record_id, path in paths.items()],
                    )
                if refreshed:
                    cur.executemany(
                        "UPDATE memory_records SET file_hash = %s, record = %s WHERE id = %s",
                        list(refreshed),
                    )
