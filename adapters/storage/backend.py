"""One value per opened index: `Backend` carries every port a storage backend implements and
the operational hooks the composition root and `qmd index copy` need, so neither ever asks
which class stores the index (docs/decisions/0050).

A backend is a package (`adapters/sqlite`, `adapters/postgres`) whose `backend` module has
one `open_backend(location, env=None, *, staged=False) -> Backend`;
`adapters.storage.registry` picks the package by the location's URL scheme. The tables every
backend stores (`TABLES`) are listed here, so the copy moves rows between any two of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from typing import Any, Protocol

from domain.ports import (
    ChunkIndex,
    DocumentStore,
    ExtractionLedger,
    FileStampIndex,
    IndexFigures,
    IndexMaintenance,
    LexicalIndex,
    LlmCache,
    MemoryRows,
    MetadataIndex,
    SummaryStore,
    VectorIndex,
)

# (lock name, wait) -> held?: a lock every process writing the index shares
IndexLock = Callable[[str, bool], AbstractContextManager[bool]]


class StoreIndex(
    DocumentStore,
    LexicalIndex,
    VectorIndex,
    LlmCache,
    IndexMaintenance,
    MetadataIndex,
    Protocol,
):
    """The index proper: documents, full text, vectors, the LLM cache, upkeep, metadata, and
    the settings `index.yml` is mirrored into (adapters.config.yaml_config.ConfigMirror)."""

    def forget_collection(self, name: str) -> None: ...
    def get_config_value(self, key: str) -> str | None: ...
    def set_config_value(self, key: str, value: str | None) -> None: ...


class ChunkTables(ChunkIndex, IndexFigures, SummaryStore, Protocol):
    """projmem's tables: chunk rows, namespaces, the figures it reports, session summaries."""


@dataclass(frozen=True)
class Table:
    """One table of the index as every backend stores it (same name, same columns)."""

    name: str
    columns: tuple[tuple[str, str], ...]  # (name, COPY kind: text | int4 | int8 | bytea)
    # "insertion": the order rows were added in (SQLite's rowid, PostgreSQL's ord column)
    order: str
    # made by its adapter on first write (an index of the original's has none): a missing
    # table reads as empty, and a copy creates it on the destination only if the source has it
    on_demand: bool = False
    # rows kept: SQLite has no foreign keys, so rows of documents gone are left out
    where: str = ""
    # ids from a sequence (SQLite AUTOINCREMENT) that are never reused: the destination's
    # sequence continues past the source's, deleted ids included
    serial: bool = False


class IndexDump(Protocol):
    """The rows of a whole index, read and written by `qmd index copy` (one dialect each)."""

    # store_config keys this backend writes for itself when it creates an index: never copied
    own_config_keys: tuple[str, ...]

    def has_table(self, name: str) -> bool: ...
    def select(self, statement: str) -> Iterator[tuple[Any, ...]]:
        """Rows of a statement written in the SQL both dialects share."""
        ...

    def read_table(self, table: Table, skip_keys: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        """Every kept row of `table` in its order (none when an on-demand table is absent);
        store_config rows whose key is in `skip_keys` are left out."""
        ...

    def high_water(self, table: Table) -> int:
        """The last id handed out for a serial table (at least its largest id): 0 if none."""
        ...

    def has_vectors(self) -> bool: ...
    def vector_rows(self) -> Iterator[tuple[str, int, bytes]]:
        """(hash, seq, little-endian float32 bytes) of every stored vector."""
        ...

    def snapshot(self) -> AbstractContextManager[None]:
        """Every read inside the block sees one state of the index (a writer beside it does
        not make its tables disagree)."""
        ...

    def load(
        self,
        source: IndexDump,
        tables: Sequence[Table],
        tick: Callable[[int], None],
        verify: Callable[[], None],
    ) -> None:
        """Write every row of `source` into this empty index in one transaction, rebuild what
        this backend derives (full text, vector indexes), and call `verify` before the commit;
        `tick(n)` after each batch of n rows."""
        ...

    def publish(self) -> None:
        """A staged index (`open_backend(..., staged=True)`) takes its place at the location;
        closing the backend without this leaves the location as it was."""
        ...


@dataclass(frozen=True)
class Backend:
    """One opened index: its ports (one connection or pool shared by them all) and hooks."""

    name: str  # "sqlite", "postgresql": status and doctor show it
    index: StoreIndex
    chunks: ChunkTables
    ledger: ExtractionLedger
    # the memory's rows; their tables are made on this call, not on open (a search never
    # creates them)
    memory: Callable[[], MemoryRows]
    # None: this backend keeps no file stamps, so every update reads every file
    stamps: FileStampIndex | None
    # None: the index has no lock of its own; writers take the lock files beside it (CLI)
    lock: IndexLock | None
    # lock name -> who holds it (`pid N on HOST: qmd embed`); None with `lock` None
    lock_holder: Callable[[str], str | None] | None
    interrupt: Callable[[], None]  # abort the statements running on this backend's connections
    size: Callable[[], int]  # bytes the index takes
    dump: IndexDump
    # driver exceptions (a failure of the storage, not of the program)
    errors: tuple[type[Exception], ...]
    close: Callable[[], None]
    # whether the location holds another index than the one opened here (a copy published
    # over the file since): what this backend writes would not reach it (REQ-INDEX-COPY-LOCK-001)
    replaced: Callable[[], bool]


@dataclass(frozen=True)
class Leftover:
    """What a `qmd index copy` that did not finish left behind: a staging file beside a SQLite
    destination, an empty staging schema (REQ-INDEX-COPY-STALE-001)."""

    what: str  # for people: `qmd doctor`, `qmd index tidy`
    # removes it, re-checked under its index's lock: False when it is in use again (kept)
    remove: Callable[[], bool]


# Fields a backend may leave None, each a capability it may lack (see their comments).
OPTIONAL_FIELDS = frozenset({"stamps", "lock", "lock_holder"})
FIELD_NAMES = tuple(field.name for field in fields(Backend))

# Opens the index at a location: a backend package's `open_backend`.
Opener = Callable[..., Backend]

TABLES: tuple[Table, ...] = (
    Table("content", (("hash", "text"), ("doc", "text"), ("created_at", "text")), "hash"),
    Table(
        "documents",
        (
            ("id", "int8"),
            ("collection", "text"),
            ("path", "text"),
            ("title", "text"),
            ("hash", "text"),
            ("created_at", "text"),
            ("modified_at", "text"),
            ("active", "int4"),
        ),
        "id",
    ),
    Table(
        "store_collections",
        (
            ("name", "text"),
            ("path", "text"),
            ("pattern", "text"),
            ("ignore_patterns", "text"),
            ("include_by_default", "int4"),
            ("update_command", "text"),
            ("context", "text"),
        ),
        "insertion",
    ),
    Table("store_config", (("key", "text"), ("value", "text")), "key"),
    Table("llm_cache", (("hash", "text"), ("result", "text"), ("created_at", "text")), "hash"),
    Table(
        "content_vectors",
        (
            ("hash", "text"),
            ("seq", "int4"),
            ("pos", "int4"),
            ("model", "text"),
            ("embed_fingerprint", "text"),
            ("total_chunks", "int4"),
            ("embedded_at", "text"),
        ),
        "hash, seq",
    ),
    Table(
        "py_document_metadata",
        (("doc_id", "int8"), ("metadata", "text")),
        "doc_id",
        on_demand=True,
        where="doc_id IN (SELECT id FROM documents)",
    ),
    Table(
        "extraction_cache",
        (
            ("source_hash", "text"),
            ("status", "text"),
            ("text_hash", "text"),
            ("title", "text"),
            ("metadata", "text"),
            ("pages", "int4"),
            ("empty_pages", "text"),
            ("reason", "text"),
            ("detail", "text"),
        ),
        "source_hash",
        on_demand=True,
    ),
    Table(
        "extraction_state",
        (
            ("collection", "text"),
            ("path", "text"),
            ("status", "text"),
            ("reason", "text"),
            ("detail", "text"),
            ("source_hash", "text"),
            ("pages", "int4"),
            ("empty_pages", "text"),
            ("extracted_at", "text"),
        ),
        "collection, path",
        on_demand=True,
    ),
    Table(
        "memory_topics",
        (("name", "text"), ("vector", "bytea"), ("created_at", "text")),
        "name",
        on_demand=True,
    ),
    Table(
        "memory_records",
        (
            ("id", "text"),
            ("kind", "text"),
            ("topic", "text"),
            ("path", "text"),
            ("file_hash", "text"),
            ("record", "text"),
            ("vector", "bytea"),
        ),
        "id",
        on_demand=True,
    ),
    Table(
        "pyqmd_chunks",
        (
            ("id", "int8"),
            ("doc_id", "int8"),
            ("hash", "text"),
            ("seq", "int4"),
            ("heading_path", "text"),
            ("start_line", "int4"),
            ("end_line", "int4"),
            ("text", "text"),
        ),
        "id",
        on_demand=True,
        where="doc_id IN (SELECT id FROM documents)",
        serial=True,
    ),
    Table(
        "pyqmd_namespaces",
        (("id", "int8"), ("name", "text")),
        "id",
        on_demand=True,
        serial=True,
    ),
    Table(
        "pyqmd_session_summaries",
        (("session_id", "text"), ("summary_json", "text"), ("updated_at", "text")),
        "session_id",
        on_demand=True,
    ),
)
