"""Seed 004's memory on disk: one markdown file per record in a memory folder (a QMD
collection, so `search`, `get`, editors and git see the records), the vectors in two extra
tables of the index (`memory_topics`, `memory_records`). The original QMD ignores tables it
does not know, so the index stays interchangeable (REQ-MEM-STORE-004).

Writes: each file goes to a temporary name in its folder and is renamed into place (atomic on
POSIX), then the index rows change in one transaction. A crash between the two leaves files the
index does not know in their current form; `load` reports those with an empty vector and the
memory use case re-embeds them. `exclusive` holds a thread lock and an `flock` on
`<folder>/.memory.lock`, so writers in other processes (another server, `qmd update`) wait.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import struct
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from adapters.sqlite.driver import Connection, connect
from domain.memory import MemoryRecord, Topic, parse_record, record_path, render_record

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
LOCK_NAME = ".memory.lock"


def _pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def _unpack(blob: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(blob) // 4}f", blob)


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _record_json(record: MemoryRecord) -> str:
    return json.dumps(
        {
            "id": record.id,
            "kind": record.kind,
            "topic": record.topic,
            "question": record.question,
            "text": record.text,
            "created": record.created,
            "updated": record.updated,
            "merged": record.merged,
            "merged_into": record.merged_into,
            "sources": list(record.sources),
            "source_questions": list(record.source_questions),
        },
        ensure_ascii=False,
    )


def _record_from(raw: str, vector: tuple[float, ...]) -> MemoryRecord:
    data = json.loads(raw)
    return MemoryRecord(
        id=data["id"],
        kind=data["kind"],
        topic=data["topic"],
        question=data["question"],
        text=data["text"],
        created=data["created"],
        updated=data["updated"],
        merged=bool(data["merged"]),
        merged_into=data["merged_into"],
        sources=tuple(data["sources"]),
        source_questions=tuple(data["source_questions"]),
        vector=vector,
    )


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, flush it to disk, rename it over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".md", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


class MarkdownMemoryStore:
    def __init__(self, folder: str, connection: Connection) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._db = connection
        self._db.executescript(SCHEMA)
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._lock_file: int | None = None

    @classmethod
    def open(
        cls, folder: str, db_path: str, env: Mapping[str, str] | None = None
    ) -> MarkdownMemoryStore:
        return cls(folder, connect(db_path, env))

    def close(self) -> None:
        self._db.close()

    # -- locking --------------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._thread_lock:
            if self._depth == 0:
                self._lock_file = os.open(self.folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(self._lock_file, fcntl.LOCK_EX)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._lock_file is not None:
                    fcntl.flock(self._lock_file, fcntl.LOCK_UN)
                    os.close(self._lock_file)
                    self._lock_file = None

    # -- topics ---------------------------------------------------------------------------

    def topics(self) -> list[Topic]:
        rows = self._db.query("SELECT name, vector FROM memory_topics ORDER BY name")
        return [Topic(name, _unpack(blob)) for name, blob in rows]

    def add_topic(self, topic: Topic) -> None:
        with self._db.transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO memory_topics (name, vector, created_at) "
                "VALUES (?, ?, datetime('now'))",
                (topic.name, _pack(topic.vector)),
            )

    # -- records --------------------------------------------------------------------------

    def get(self, record_id: str) -> MemoryRecord | None:
        rows = self._db.query(
            "SELECT record, vector FROM memory_records WHERE id = ?", (record_id,)
        )
        return _record_from(rows[0][0], _unpack(rows[0][1])) if rows else None

    def records(self, topic: str | None = None, kind: str | None = None) -> list[MemoryRecord]:
        sql = "SELECT record, vector FROM memory_records WHERE 1 = 1"
        params: list[str] = []
        if topic is not None:
            sql += " AND topic = ?"
            params.append(topic)
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        rows = self._db.query(sql + " ORDER BY id", params)
        return [_record_from(raw, _unpack(blob)) for raw, blob in rows]

    def put(self, records: Sequence[MemoryRecord]) -> None:
        rows = []
        for record in records:
            path = self._path_for(record)
            text = render_record(record)
            current = path.read_text(encoding="utf-8") if path.is_file() else None
            if current != text:
                write_atomically(path, text)
            relative = path.relative_to(self.folder).as_posix()
            rows.append(
                (
                    record.id,
                    record.kind,
                    record.topic,
                    relative,
                    _hash(text),
                    _record_json(record),
                    _pack(record.vector),
                )
            )
        with self._db.transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO memory_records "
                "(id, kind, topic, path, file_hash, record, vector) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def _path_for(self, record: MemoryRecord) -> Path:
        """Where the record's file is: where it already lives (a person may have moved it),
        else its usual place."""
        rows = self._db.query("SELECT path FROM memory_records WHERE id = ?", (record.id,))
        if rows and (self.folder / str(rows[0][0])).is_file():
            return self.folder / str(rows[0][0])
        return self.folder / record_path(record)

    def load(self) -> list[MemoryRecord]:
        known = {
            row[0]: (row[1], row[2], row[3])
            for row in self._db.query("SELECT id, path, file_hash, vector FROM memory_records")
        }
        found: dict[str, MemoryRecord] = {}
        paths: dict[str, str] = {}
        refreshed: list[tuple[str, str, str]] = []
        for path in sorted(self.folder.rglob("*.md")):
            relative = path.relative_to(self.folder).as_posix()
            if path.name.startswith(".tmp-"):
                with contextlib.suppress(OSError):
                    path.unlink()  # a write that never reached its rename
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            record = parse_record(text)
            if record is None or record.id in found:
                continue
            row = known.get(record.id)
            vector: tuple[float, ...] = ()
            if row is not None and row[0] == relative and row[1] == _hash(text):
                vector = _unpack(row[2])
            elif row is not None:
                stored = self.get(record.id)
                if (
                    stored is not None
                    and stored.text == record.text
                    and (stored.question == record.question and stored.topic == record.topic)
                ):
                    vector = stored.vector  # only flags or the place changed: same words
                    refreshed.append((_hash(text), _record_json(record), record.id))
            found[record.id] = MemoryRecord(**{**_fields(record), "vector": vector})
            paths[record.id] = relative
        gone = [record_id for record_id in known if record_id not in found]
        with self._db.transaction():
            self._db.executemany("DELETE FROM memory_records WHERE id = ?", [(i,) for i in gone])
            for record_id, relative in paths.items():
                self._db.execute(
                    "UPDATE memory_records SET path = ? WHERE id = ?", (relative, record_id)
                )
            self._db.executemany(
                "UPDATE memory_records SET file_hash = ?, record = ? WHERE id = ?", refreshed
            )
        return list(found.values())


def _fields(record: MemoryRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}
