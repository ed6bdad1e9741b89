"""Seed 004's memory rows both index stores share (`adapters.sqlite`, `adapters.postgres`):
the `MemoryRows` reads. Statements use SQLite's `?` placeholders (PostgreSQL: `pyformat`);
each backend keeps its writes, whose upsert syntax differs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class MemoryRowReads:
    """The MemoryRows reads over `_memory_rows`, which each store implements."""

    # how ORDER BY compares text byte for byte: a collation clause (PostgreSQL), or nothing
    _BYTEWISE = ""

    def _memory_rows(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def memory_topics(self) -> list[tuple[str, bytes]]:
        rows = self._memory_rows(
            f"SELECT name, vector FROM memory_topics ORDER BY name{self._BYTEWISE}"
        )
        return [(str(name), bytes(blob)) for name, blob in rows]

    def memory_record(self, record_id: str) -> tuple[str, bytes] | None:
        rows = self._memory_rows(
            "SELECT record, vector FROM memory_records WHERE id = ?", (record_id,)
        )
        return (str(rows[0][0]), bytes(rows[0][1])) if rows else None

    def memory_records(self, topic: str | None, kind: str | None) -> list[tuple[str, bytes]]:
        statement = "SELECT record, vector FROM memory_records WHERE 1 = 1"
        params: list[str] = []
        if topic is not None:
            statement += " AND topic = ?"
            params.append(topic)
        if kind is not None:
            statement += " AND kind = ?"
            params.append(kind)
        rows = self._memory_rows(f"{statement} ORDER BY id{self._BYTEWISE}", params)
        return [(str(raw), bytes(blob)) for raw, blob in rows]

    def memory_path(self, record_id: str) -> str | None:
        rows = self._memory_rows("SELECT path FROM memory_records WHERE id = ?", (record_id,))
        return str(rows[0][0]) if rows else None

    def memory_files(self) -> list[tuple[str, str, str, bytes]]:
        rows = self._memory_rows("SELECT id, path, file_hash, vector FROM memory_records")
        return [(str(i), str(p), str(h), bytes(v)) for i, p, h, v in rows]
