"""Seed 004's memory on disk: one markdown file per record in a memory folder (a QMD
collection, so `search`, `get`, editors and git see the records), the vectors in two extra
tables of the index (`memory_topics`, `memory_records`), reached through `MemoryRows`: the
SQLite adapter's `SqliteMemoryRows` or `PostgresIndex` itself. The original QMD ignores tables
it does not know, so a SQLite index stays interchangeable (REQ-MEM-STORE-004).

Writes: each file goes to a temporary name in its folder and is renamed into place (atomic on
POSIX), then the index rows change in one transaction. A crash between the two leaves files the
index does not know in their current form; `load` reports those with an empty vector and the
memory use case re-embeds them. `exclusive` holds a thread lock and a lock across processes:
by default an `flock` on `<folder>/.memory.lock`; on PostgreSQL an advisory lock in the
database, which holds across machines too (given by the composition root).
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
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from domain.memory import MemoryRecord, Topic, parse_record, record_path, render_record
from domain.ports import MemoryRows

# (id, kind, topic, path, file hash, record JSON, vector)
MemoryRow = tuple[str, str, str, str, str, str, bytes]


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


def _read(path: Path) -> str:
    """The file's text exactly: no newline translation (a "\r" in an answer stays one)."""
    with open(path, encoding="utf-8", newline="") as stream:
        return stream.read()


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, flush it to disk, rename it over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".md", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


class MarkdownMemoryStore:
    """`MemoryStore`: the files in `folder`, the rows in `rows`. `lock` gives the lock across
    processes (default: an `flock` on the folder); `on_close` releases what `rows` holds."""

    def __init__(
        self,
        folder: str,
        rows: MemoryRows,
        lock: Callable[[], AbstractContextManager[object]] | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._rows = rows
        self._lock = lock or self._flock
        self._on_close = on_close
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._held: contextlib.ExitStack | None = None

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()

    # -- locking --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _flock(self) -> Iterator[None]:
        handle = os.open(self.folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            os.close(handle)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._thread_lock:
            if self._depth == 0:
                held = contextlib.ExitStack()
                held.enter_context(self._lock())
                self._held = held
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._held is not None:
                    self._held.close()
                    self._held = None

    # -- topics ---------------------------------------------------------------------------

    def topics(self) -> list[Topic]:
        return [Topic(name, _unpack(blob)) for name, blob in self._rows.memory_topics()]

    def add_topic(self, topic: Topic) -> None:
        self._rows.put_memory_topic(topic.name, _pack(topic.vector))

    # -- records --------------------------------------------------------------------------

    def get(self, record_id: str) -> MemoryRecord | None:
        row = self._rows.memory_record(record_id)
        return _record_from(row[0], _unpack(row[1])) if row else None

    def records(self, topic: str | None = None, kind: str | None = None) -> list[MemoryRecord]:
        return [
            _record_from(raw, _unpack(blob)) for raw, blob in self._rows.memory_records(topic, kind)
        ]

    def put(self, records: Sequence[MemoryRecord]) -> None:
        rows = []
        for record in records:
            path = self._path_for(record)
            text = render_record(record)
            current = _read(path) if path.is_file() else None
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
        self._rows.put_memory_records(rows)

    def _path_for(self, record: MemoryRecord) -> Path:
        """Where the record's file is: where it already lives (a person may have moved it),
        else its usual place."""
        known = self._rows.memory_path(record.id)
        if known is not None and (self.folder / known).is_file():
            return self.folder / known
        return self.folder / record_path(record)

    def load(self) -> list[MemoryRecord]:
        known = {row[0]: (row[1], row[2], row[3]) for row in self._rows.memory_files()}
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
                text = _read(path)
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
        self._rows.sync_memory_records(gone, paths, refreshed)
        return list(found.values())


def _fields(record: MemoryRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}
