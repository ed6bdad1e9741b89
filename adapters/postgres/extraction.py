"""The extraction ledger on PostgreSQL (the ExtractionLedger port): cached outcomes per source
hash and the per-document states, as `adapters.sqlite.extraction` on SQLite."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.postgres.connection import PgConnections, pyformat
from adapters.storage.sql_extraction import (
    CACHE_ROW,
    DELETE_STATES,
    STATE_ROW,
    LedgerReads,
    cache_params,
    state_params,
)
from domain.extraction import CachedExtraction, ExtractionState

_REMEMBER = pyformat(
    f"INSERT INTO {CACHE_ROW} "
    "ON CONFLICT (source_hash) DO UPDATE SET status = excluded.status, "
    "text_hash = excluded.text_hash, title = excluded.title, "
    "metadata = excluded.metadata, pages = excluded.pages, "
    "empty_pages = excluded.empty_pages, reason = excluded.reason, "
    "detail = excluded.detail"
)
_RECORD = pyformat(
    f"INSERT INTO {STATE_ROW} "
    "ON CONFLICT (collection, path) DO UPDATE SET status = excluded.status, "
    "reason = excluded.reason, detail = excluded.detail, "
    "source_hash = excluded.source_hash, pages = excluded.pages, "
    "empty_pages = excluded.empty_pages, extracted_at = excluded.extracted_at"
)


class PgExtractionLedger(LedgerReads, PgConnections):
    """ExtractionLedger over the pool."""

    _BYTEWISE = ' COLLATE "C"'

    def _ledger_rows(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._query(pyformat(statement), params)

    def remember_extraction(self, outcome: CachedExtraction) -> None:
        self._execute(_REMEMBER, cache_params(outcome))

    def record_states(self, collection: str, states: Sequence[ExtractionState]) -> None:
        """Replace the collection's states in one transaction (readers see old or new)."""
        with self.transaction(), self._conn() as conn:
            conn.execute(pyformat(DELETE_STATES), (collection,))
            if not states:
                return
            with conn.cursor() as cur:
                cur.executemany(_RECORD, [state_params(s) for s in states])
