"""`PostgresIndex`: the index in a PostgreSQL database (pgvector for embeddings) behind the
DocumentStore, IndexMaintenance, LexicalIndex, VectorIndex, LlmCache and FileStampIndex ports.

Every public method is one unit of work on a pooled connection (one transaction, committed
when the method returns), so any number of threads, and of processes, share one index: readers
see the last committed state (READ COMMITTED), writers serialise on row locks. `transaction()`
pins one connection to the calling thread and groups everything the thread does until it ends
into a single commit, as `SqliteIndex.transaction` does. Two indexers are kept apart by the
advisory locks of `index_lock` (docs/decisions/0043).

The class is assembled from one part per concern, each in its own module as on SQLite:
`connection` (pool, transactions, locks), `documents`, `fts`, `lexical`, `vectors`, `metadata`,
`extraction`, `memory`, `chunks` and `stamps`; the LLM cache stays here.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING

import psycopg

from adapters.postgres.chunks import PgChunkIndex
from adapters.postgres.connection import PostgresError, drop_schema, schema_exists
from adapters.postgres.documents import PgDocuments
from adapters.postgres.extraction import PgExtractionLedger
from adapters.postgres.fts import fts_params, fts_row_sql
from adapters.postgres.lexical import PgLexical
from adapters.postgres.memory import PgMemoryRows
from adapters.postgres.metadata import PgMetadata
from adapters.postgres.stamps import PgFileStamps
from adapters.postgres.url import is_postgres_url, split_schema
from adapters.postgres.vectors import PgVectors, vector_literal
from adapters.redaction import redact
from adapters.storage.sql_rows import LLM_CACHE_KEEP
from adapters.storage.sql_rows import now_iso as _now_iso


class PostgresIndex(
    PgDocuments,
    PgMetadata,
    PgExtractionLedger,
    PgMemoryRows,
    PgChunkIndex,
    PgLexical,
    PgVectors,
    PgFileStamps,
):
    """One index in one PostgreSQL schema (`?schema=` in the URL, else the user's default)."""

    @classmethod
    def open(cls, url: str, env: Mapping[str, str] | None = None) -> PostgresIndex:
        return cls(url, env)

    def __enter__(self) -> PostgresIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, key: str) -> str | None:
        value = self._scalar("SELECT result FROM llm_cache WHERE hash = %s", (key,))
        return None if value is None else str(value)

    def put(self, key: str, value: str) -> None:
        """Best effort, as on SQLite: a cache entry that cannot be written is not cached."""
        try:
            with self._conn() as conn:
                conn.execute(
                    "INSERT INTO llm_cache (hash, result, created_at) VALUES (%s, %s, %s) "
                    "ON CONFLICT (hash) DO UPDATE SET result = excluded.result, "
                    "created_at = excluded.created_at",
                    (key, value, _now_iso()),
                )
                if random.random() < 0.01:
                    conn.execute(
                        "DELETE FROM llm_cache WHERE hash NOT IN (SELECT hash FROM llm_cache "
                        f"ORDER BY created_at DESC LIMIT {LLM_CACHE_KEEP})"
                    )
        except psycopg.OperationalError:
            if getattr(self._local, "conn", None) is not None:
                raise

    def clear(self) -> None:
        self._execute("DELETE FROM llm_cache")


__all__ = [
    "PostgresError",
    "PostgresIndex",
    "drop_schema",
    "fts_params",
    "fts_row_sql",
    "is_postgres_url",
    "redact",
    "schema_exists",
    "split_schema",
    "vector_literal",
]


if TYPE_CHECKING:  # structural conformance, checked by mypy
    from domain.ports import (
        ChunkIndex,
        DocumentStore,
        ExtractionLedger,
        FileStampIndex,
        IndexFigures,
        IndexMaintenance,
        LexicalIndex,
        LlmCache,
        MetadataIndex,
        NamespaceRegistry,
        SummaryStore,
        VectorIndex,
    )

    def _conforms(index: PostgresIndex) -> None:
        _store: DocumentStore = index
        _lex: LexicalIndex = index
        _vec: VectorIndex = index
        _cache: LlmCache = index
        _upkeep: IndexMaintenance = index
        _metadata: MetadataIndex = index
        _ledger: ExtractionLedger = index
        _chunks: ChunkIndex = index
        _names: NamespaceRegistry = index
        _figures: IndexFigures = index
        _summaries: SummaryStore = index
        _stamps: FileStampIndex = index
