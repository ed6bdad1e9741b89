"""`SqliteExtractionLedger`: extraction outcomes in two extra tables of the index file.

The original QMD 2.8.3 never reads tables it does not know, so it still opens and serves an
index holding these (tests/integration/test_original_index_interop.py). They are created on the
first extracted document, not on open: an index of markdown files only stays table for table
what the original writes (REQ-EXTRACT-007).

* `extraction_cache`: one row per source content hash (sha256 of the file's bytes): the content
  hash of the extracted text (its body lives in `content`, like any document's), title,
  metadata (JSON), page counts, or the failure's reason and detail.
* `extraction_state`: one row per (collection, path) of an extracted file: ok / failed, reason,
  pages without a text layer; replaced for a collection by each `qmd update` of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.sqlite.driver import Connection
from adapters.storage.sql_extraction import (
    CACHE_ROW,
    DELETE_STATES,
    STATE_ROW,
    LedgerReads,
    cache_params,
    state_params,
)
from domain.extraction import CachedExtraction, ExtractionState

CACHE_DDL = """
    CREATE TABLE IF NOT EXISTS extraction_cache (
      source_hash TEXT PRIMARY KEY,
      status TEXT NOT NULL,
      text_hash TEXT NOT NULL DEFAULT '',
      title TEXT NOT NULL DEFAULT '',
      metadata TEXT NOT NULL DEFAULT '{}',
      pages INTEGER NOT NULL DEFAULT 0,
      empty_pages TEXT NOT NULL DEFAULT '[]',
      reason TEXT NOT NULL DEFAULT '',
      detail TEXT NOT NULL DEFAULT ''
    )
  """

STATE_DDL = """
    CREATE TABLE IF NOT EXISTS extraction_state (
      collection TEXT NOT NULL,
      path TEXT NOT NULL,
      status TEXT NOT NULL,
      reason TEXT NOT NULL DEFAULT '',
      detail TEXT NOT NULL DEFAULT '',
      source_hash TEXT NOT NULL DEFAULT '',
      pages INTEGER NOT NULL DEFAULT 0,
      empty_pages TEXT NOT NULL DEFAULT '[]',
      extracted_at TEXT NOT NULL DEFAULT '',
      PRIMARY KEY (collection, path)
    )
  """


class SqliteExtractionLedger(LedgerReads):
    """`ExtractionLedger` over an open index connection (shared with `SqliteIndex`)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def _exists(self) -> bool:
        # Asked every time (a lookup in sqlite_master, microseconds): a transaction rolled
        # back after creating the tables takes them away again.
        return (
            self._conn.scalar(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'extraction_state'"
            )
            is not None
        )

    def _create(self) -> None:
        if self._exists():
            return
        with self._conn.transaction():
            self._conn.execute(CACHE_DDL)
            self._conn.execute(STATE_DDL)

    def _ledger_rows(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.query(statement, params) if self._exists() else []

    def remember_extraction(self, outcome: CachedExtraction) -> None:
        self._create()
        with self._conn.transaction():
            self._conn.execute(f"INSERT OR REPLACE INTO {CACHE_ROW}", cache_params(outcome))

    def record_states(self, collection: str, states: Sequence[ExtractionState]) -> None:
        if not states and not self._exists():
            return  # a markdown-only collection: no extra tables
        self._create()
        with self._conn.transaction():
            self._conn.execute(DELETE_STATES, (collection,))
            self._conn.executemany(
                f"INSERT OR REPLACE INTO {STATE_ROW}", [state_params(s) for s in states]
            )
