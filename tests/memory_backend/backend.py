"""`open_backend` for `memory:NAME` locations: the in-memory fakes (tests/fakes.py) as one
`Backend`, held to the same contract tests as SQLite and PostgreSQL. An index lives as long as
the process or until `forget(location)`: a second open of one location sees the first's rows,
as a file or a schema would."""

from __future__ import annotations

import os
import re
import socket
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from adapters.storage.backend import Backend, IndexDump, Table
from adapters.storage.sql_extraction import cache_params, state_params
from adapters.storage.sql_rows import collection_params, metadata_text
from domain.errors import INVALID_ARGUMENT, QmdError
from tests.fakes import (
    InMemoryChunkIndex,
    InMemoryExtractionLedger,
    InMemoryFileStamps,
    InMemoryStore,
)

SCHEME = "memory:"
_COUNT = re.compile(r"SELECT COUNT\(\*\) FROM (\w+)(?: WHERE .*)?")


class FakeStorageError(Exception):
    """What a storage failure of this backend would raise (`Backend.errors`); none does."""


class InMemoryMemoryRows:
    """MemoryRows over dicts: topics by name, records by id, read in byte order of the key."""

    def __init__(self) -> None:
        self.topics: dict[str, bytes] = {}
        # id -> (kind, topic, path, file hash, record JSON, vector)
        self.records: dict[str, tuple[str, str, str, str, str, bytes]] = {}

    def memory_topics(self) -> list[tuple[str, bytes]]:
        return sorted(self.topics.items())

    def put_memory_topic(self, name: str, vector: bytes) -> None:
        self.topics[name] = bytes(vector)

    def memory_record(self, record_id: str) -> tuple[str, bytes] | None:
        row = self.records.get(record_id)
        return (row[4], row[5]) if row else None

    def memory_records(self, topic: str | None, kind: str | None) -> list[tuple[str, bytes]]:
        return [
            (row[4], row[5])
            for _, row in sorted(self.records.items())
            if (topic is None or row[1] == topic) and (kind is None or row[0] == kind)
        ]

    def memory_path(self, record_id: str) -> str | None:
        row = self.records.get(record_id)
        return row[2] if row else None

    def memory_files(self) -> list[tuple[str, str, str, bytes]]:
        return [(i, row[2], row[3], row[5]) for i, row in self.records.items()]

    def put_memory_records(
        self, rows: Sequence[tuple[str, str, str, str, str, str, bytes]]
    ) -> None:
        for record_id, kind, topic, path, file_hash, record, vector in rows:
            self.records[record_id] = (kind, topic, path, file_hash, record, bytes(vector))

    def sync_memory_records(
        self,
        gone: Sequence[str],
        paths: Mapping[str, str],
        refreshed: Sequence[tuple[str, str, str]],
    ) -> None:
        for record_id in gone:
            self.records.pop(record_id, None)
        for record_id, path in paths.items():
            if record_id in self.records:
                kind, topic, _, file_hash, record, vector = self.records[record_id]
                self.records[record_id] = (kind, topic, path, file_hash, record, vector)
        for file_hash, record, record_id in refreshed:
            if record_id in self.records:
                kind, topic, path, _, _, vector = self.records[record_id]
                self.records[record_id] = (kind, topic, path, file_hash, record, vector)


class ProcessLock:
    """Named locks shared by every opening of one index in this process, each with its
    holder's words, as PostgreSQL's advisory locks are shared by every process."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._holders: dict[str, str] = {}

    @contextmanager
    def hold(self, name: str, wait: bool) -> Iterator[bool]:
        with self._changed:
            while name in self._holders and wait:
                self._changed.wait()
            if name in self._holders:
                yield False
                return
            self._holders[name] = f"pid {os.getpid()} on {socket.gethostname()}: qmd {name}"
        try:
            yield True
        finally:
            with self._changed:
                del self._holders[name]
                self._changed.notify_all()

    def holder(self, name: str) -> str | None:
        with self._changed:
            return self._holders.get(name)


@dataclass
class MemoryIndex:
    """Every port's state of one in-memory index."""

    store: InMemoryStore = field(default_factory=InMemoryStore)
    ledger: InMemoryExtractionLedger = field(default_factory=InMemoryExtractionLedger)
    stamps: InMemoryFileStamps = field(default_factory=InMemoryFileStamps)
    memory: InMemoryMemoryRows = field(default_factory=InMemoryMemoryRows)
    lock: ProcessLock = field(default_factory=ProcessLock)
    chunks: InMemoryChunkIndex = field(init=False)

    def __post_init__(self) -> None:
        self.chunks = InMemoryChunkIndex(self.store)


_INDEXES: dict[str, MemoryIndex] = {}
_GUARD = threading.Lock()


def forget(location: str) -> None:
    """Drop the index at `location` (the end of a test's location)."""
    with _GUARD:
        _INDEXES.pop(location, None)


class MemoryDump:
    """The fake's rows in `TABLES`' columns and order, each encoded as the SQL stores encode
    it (adapters/storage/sql_*.py); the times it does not keep (a cache entry's, a vector's,
    a topic's, a summary's) read as "", and a content row takes its first document's. It is
    a copy source only: no copy writes into it."""

    own_config_keys: tuple[str, ...] = ()

    def __init__(self, index: MemoryIndex, publish: Callable[[], None]) -> None:
        self._index = index
        self._publish = publish

    def _tables(self) -> dict[str, Callable[[], list[tuple[Any, ...]]]]:
        store, index = self._index.store, self._index
        first_seen: dict[str, str] = {}
        for row in sorted(store._rows.values(), key=lambda r: r.id):
            first_seen.setdefault(row.hash, row.created_at)
        return {
            "content": lambda: [
                (h, text, first_seen.get(h, "")) for h, text in sorted(store._content.items())
            ],
            "documents": lambda: [
                (
                    r.id,
                    r.collection,
                    r.path,
                    r.title,
                    r.hash,
                    r.created_at,
                    r.modified_at,
                    int(r.active),
                )
                for r in sorted(store._rows.values(), key=lambda r: r.id)
            ],
            "store_collections": lambda: [
                collection_params(c) for c in store._collections.values()
            ],
            "store_config": lambda: sorted(store._config.items()),
            "py_document_metadata": lambda: [
                (doc_id, metadata_text(meta))
                for doc_id, meta in sorted(store._metadata.items())
                if doc_id in store._rows
            ],
            "extraction_cache": lambda: [
                cache_params(outcome) for _, outcome in sorted(index.ledger.cache.items())
            ],
            "extraction_state": lambda: [
                state_params(state) for _, state in sorted(index.ledger.states.items())
            ],
            "pyqmd_chunks": lambda: [
                (chunk_id, doc_id, digest, *section)
                for chunk_id, (doc_id, digest, section) in sorted(index.chunks._rows.items())
                if doc_id in store._rows
            ],
            "llm_cache": lambda: [(k, v, "") for k, v in sorted(store._cache.items())],
            "content_vectors": lambda: [
                (v.hash, v.seq, v.pos, v.model, v.fingerprint, v.total, "")
                for _, v in sorted(store._vectors.items())
            ],
            "memory_topics": lambda: [(n, v, "") for n, v in index.memory.memory_topics()],
            "memory_records": lambda: [
                (i, *row) for i, row in sorted(index.memory.records.items())
            ],
            "pyqmd_namespaces": lambda: sorted((i, n) for n, i in index.chunks._namespaces.items()),
            "pyqmd_session_summaries": lambda: [
                (s, text, "") for s, text in sorted(index.chunks._summaries.items())
            ],
        }

    def has_table(self, name: str) -> bool:
        return name in self._tables()

    def select(self, statement: str) -> Iterator[tuple[Any, ...]]:
        """Only the row counts `qmd index copy` verifies by (adapters/cli/index_copy.py): the
        fake keeps no table with a `Table.where`, so a count's WHERE changes nothing."""
        counted = _COUNT.fullmatch(statement)
        if counted is None:
            raise QmdError(INVALID_ARGUMENT, f"the in-memory backend answers no SQL: {statement}")
        table = counted.group(1)
        if table == "vectors_vec":
            yield (len(self._index.store._vectors),)
            return
        read = self._tables().get(table)
        yield (len(read()) if read is not None else 0,)

    def read_table(self, table: Table, skip_keys: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        read = self._tables().get(table.name)
        rows = read() if read is not None else []
        if table.name == "store_config":
            rows = [row for row in rows if row[0] not in skip_keys]
        yield from rows

    def high_water(self, table: Table) -> int:
        if table.name == "pyqmd_namespaces":
            return len(self._index.chunks._namespaces)
        if table.name == "pyqmd_chunks":
            return self._index.chunks._next - 1
        return 0

    def has_vectors(self) -> bool:
        return bool(self._index.store._vectors)

    def vector_rows(self) -> Iterator[tuple[str, int, bytes]]:
        for (digest, seq), vector in sorted(self._index.store._vectors.items()):
            yield digest, seq, struct.pack(f"<{len(vector.embedding)}f", *vector.embedding)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        yield  # one thread's dicts: nothing changes between two reads of one block

    def load(
        self,
        source: IndexDump,
        tables: Sequence[Table],
        tick: Callable[[int], None],
        verify: Callable[[], None],
    ) -> None:
        raise QmdError(INVALID_ARGUMENT, "the in-memory backend is no copy destination")

    def publish(self) -> None:
        self._publish()


def open_backend(
    location: str, env: Mapping[str, str] | None = None, *, staged: bool = False
) -> Backend:
    """The in-memory index at `location` (`memory:NAME`), made on first open; `staged`: a new
    one that takes the location's place on `dump.publish()`."""
    if not location.startswith(SCHEME) or not location[len(SCHEME) :]:
        raise QmdError(INVALID_ARGUMENT, f"not an in-memory location: {location!r}")
    with _GUARD:
        index = MemoryIndex() if staged else _INDEXES.setdefault(location, MemoryIndex())

    def publish() -> None:
        with _GUARD:
            _INDEXES[location] = index

    def replaced() -> bool:
        with _GUARD:
            return _INDEXES.get(location, index) is not index

    def size() -> int:
        return sum(len(text.encode("utf-8")) for text in index.store._content.values())

    return Backend(
        name="fake",
        index=index.store,
        chunks=index.chunks,
        ledger=index.ledger,
        memory=lambda: index.memory,
        stamps=index.stamps,
        lock=index.lock.hold,
        lock_holder=index.lock.holder,
        interrupt=lambda: None,
        size=size,
        dump=MemoryDump(index, publish),
        errors=(FakeStorageError,),
        close=lambda: None,
        replaced=replaced,
    )
