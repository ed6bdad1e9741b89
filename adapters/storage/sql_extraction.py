"""The extraction ledger both index stores share (`adapters.sqlite`, `adapters.postgres`): its
reads, and the rows and statements its writes use. Statements use SQLite's `?` placeholders
(PostgreSQL: `pyformat`); each backend keeps its upsert syntax and when its tables exist."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from domain.extraction import (
    CACHE_COLUMNS,
    STATE_COLUMNS,
    CachedExtraction,
    ExtractionState,
    cached_from_row,
    state_from_row,
)

# after `INSERT [OR REPLACE] INTO `: a row of CACHE_COLUMNS / STATE_COLUMNS
CACHE_ROW = f"extraction_cache ({CACHE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
STATE_ROW = f"extraction_state ({STATE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
DELETE_STATES = "DELETE FROM extraction_state WHERE collection = ?"


def cache_params(outcome: CachedExtraction) -> tuple[Any, ...]:
    """`outcome` as an `extraction_cache` row (CACHE_COLUMNS; the lists and maps as JSON)."""
    return (
        outcome.source_hash,
        outcome.status,
        outcome.text_hash,
        outcome.title,
        json.dumps(dict(outcome.metadata), ensure_ascii=False, sort_keys=True),
        outcome.pages,
        json.dumps(list(outcome.empty_pages)),
        outcome.reason,
        outcome.detail,
    )


def state_params(state: ExtractionState) -> tuple[Any, ...]:
    """`state` as an `extraction_state` row (STATE_COLUMNS)."""
    return (
        state.collection,
        state.path,
        state.status,
        state.reason,
        state.detail,
        state.source_hash,
        state.pages,
        json.dumps(list(state.empty_pages)),
        state.extracted_at,
    )


class LedgerReads:
    """The ExtractionLedger's reads over `_ledger_rows`, which each store implements (no
    rows while its tables do not exist)."""

    # how ORDER BY compares text byte for byte: a collation clause (PostgreSQL), or nothing
    _BYTEWISE = ""

    def _ledger_rows(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def cached_extraction(self, source_hash: str) -> CachedExtraction | None:
        rows = self._ledger_rows(
            f"SELECT {CACHE_COLUMNS} FROM extraction_cache WHERE source_hash = ?", (source_hash,)
        )
        return cached_from_row(rows[0]) if rows else None

    def extraction_states(self, collection: str | None = None) -> list[ExtractionState]:
        order = f"path{self._BYTEWISE}"
        if collection is None:
            rows = self._ledger_rows(
                f"SELECT {STATE_COLUMNS} FROM extraction_state "
                f"ORDER BY collection{self._BYTEWISE}, {order}"
            )
        else:
            rows = self._ledger_rows(
                f"SELECT {STATE_COLUMNS} FROM extraction_state WHERE collection = ? "
                f"ORDER BY {order}",
                (collection,),
            )
        return [state_from_row(r) for r in rows]

    def extraction_state(self, collection: str, path: str) -> ExtractionState | None:
        rows = self._ledger_rows(
            f"SELECT {STATE_COLUMNS} FROM extraction_state WHERE collection = ? AND path = ?",
            (collection, path),
        )
        return state_from_row(rows[0]) if rows else None
