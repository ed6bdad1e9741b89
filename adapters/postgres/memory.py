"""Seed 004's memory rows on PostgreSQL (`MemoryRows`): topic and record vectors, as
`adapters.sqlite.memory` on SQLite."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adapters.postgres.connection import PgConnections


class PgMemoryRows(PgConnections):
    """MemoryRows over the pool."""

    def memory_topics(self) -> list[tuple[str, bytes]]:
        rows = self._query('SELECT name, vector FROM memory_topics ORDER BY name COLLATE "C"')
        return [(str(name), bytes(blob)) for name, blob in rows]

    def put_memory_topic(self, name: str, vector: bytes) -> None:
        self._execute(
            "INSERT INTO memory_topics (name, vector, created_at) VALUES (%s, %s, "
            "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')) "
            "ON CONFLICT (name) DO UPDATE SET vector = excluded.vector, "
            "created_at = excluded.created_at",
            (name, vector),
        )

    def memory_record(self, record_id: str) -> tuple[str, bytes] | None:
        rows = self._query("SELECT record, vector FROM memory_records WHERE id = %s", (record_id,))
        return (str(rows[0][0]), bytes(rows[0][1])) if rows else None

    def memory_records(self, topic: str | None, kind: str | None) -> list[tuple[str, bytes]]:
        statement = "SELECT record, vector FROM memory_records WHERE true"
        params: list[str] = []
        if topic is not None:
            statement += " AND topic = %s"
            params.append(topic)
        if kind is not None:
            statement += " AND kind = %s"
            params.append(kind)
        rows = self._query(statement + ' ORDER BY id COLLATE "C"', params)
        return [(str(raw), bytes(blob)) for raw, blob in rows]

    def memory_path(self, record_id: str) -> str | None:
        value = self._scalar("SELECT path FROM memory_records WHERE id = %s", (record_id,))
        return None if value is None else str(value)

    def memory_files(self) -> list[tuple[str, str, str, bytes]]:
        rows = self._query("SELECT id, path, file_hash, vector FROM memory_records")
        return [(str(i), str(p), str(h), bytes(v)) for i, p, h, v in rows]

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
