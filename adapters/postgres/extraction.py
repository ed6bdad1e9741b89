"""The extraction ledger on PostgreSQL (the ExtractionLedger port): cached outcomes per source
hash and the per-document states, as `adapters.sqlite.extraction` on SQLite."""

from __future__ import annotations

import json
from collections.abc import Sequence

from adapters.postgres.connection import PgConnections
from domain.extraction import (
    CACHE_COLUMNS,
    STATE_COLUMNS,
    CachedExtraction,
    ExtractionState,
    cached_from_row,
    state_from_row,
)


class PgExtractionLedger(PgConnections):
    """ExtractionLedger over the pool."""

    def cached_extraction(self, source_hash: str) -> CachedExtraction | None:
        rows = self._query(
            f"SELECT {CACHE_COLUMNS} FROM extraction_cache WHERE source_hash = %s",
            (source_hash,),
        )
        if not rows:
            return None
        return cached_from_row(rows[0])

    def remember_extraction(self, outcome: CachedExtraction) -> None:
        self._execute(
            "INSERT INTO extraction_cache (source_hash, status, text_hash, title, metadata, "
            "pages, empty_pages, reason, detail) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (source_hash) DO UPDATE SET status = excluded.status, "
            "text_hash = excluded.text_hash, title = excluded.title, "
            "metadata = excluded.metadata, pages = excluded.pages, "
            "empty_pages = excluded.empty_pages, reason = excluded.reason, "
            "detail = excluded.detail",
            (
                outcome.source_hash,
                outcome.status,
                outcome.text_hash,
                outcome.title,
                json.dumps(dict(outcome.metadata), ensure_ascii=False, sort_keys=True),
                outcome.pages,
                json.dumps(list(outcome.empty_pages)),
                outcome.reason,
                outcome.detail,
            ),
        )

    def record_states(self, collection: str, states: Sequence[ExtractionState]) -> None:
        """Replace the collection's states in one transaction (readers see old or new)."""
        with self.transaction(), self._conn() as conn:
            conn.execute("DELETE FROM extraction_state WHERE collection = %s", (collection,))
            if not states:
                return
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO extraction_state ({STATE_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (collection, path) DO UPDATE SET status = excluded.status, "
                    "reason = excluded.reason, detail = excluded.detail, "
                    "source_hash = excluded.source_hash, pages = excluded.pages, "
                    "empty_pages = excluded.empty_pages, extracted_at = excluded.extracted_at",
                    [
                        (
                            s.collection,
                            s.path,
                            s.status,
                            s.reason,
                            s.detail,
                            s.source_hash,
                            s.pages,
                            json.dumps(list(s.empty_pages)),
                            s.extracted_at,
                        )
                        for s in states
                    ],
                )

    def extraction_states(self, collection: str | None = None) -> list[ExtractionState]:
        if collection is None:
            rows = self._query(
                f"SELECT {STATE_COLUMNS} FROM extraction_state "
                'ORDER BY collection COLLATE "C", path COLLATE "C"'
            )
        else:
            rows = self._query(
                f"SELECT {STATE_COLUMNS} FROM extraction_state WHERE collection = %s "
                'ORDER BY path COLLATE "C"',
                (collection,),
            )
        return [state_from_row(r) for r in rows]

    def extraction_state(self, collection: str, path: str) -> ExtractionState | None:
        rows = self._query(
            f"SELECT {STATE_COLUMNS} FROM extraction_state WHERE collection = %s AND path = %s",
            (collection, path),
        )
        return state_from_row(rows[0]) if rows else None
