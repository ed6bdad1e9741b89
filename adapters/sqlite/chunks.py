"""Chunk rows, namespace ids and session summaries in the index file: extra tables only.

The original QMD 2.8.3 never reads or drops tables it does not know, so these live beside its
schema without changing any of its tables, triggers or `user_version` (the index still opens
and serves in the original; tests/integration/test_original_index_interop.py). The rows are
tied to documents by id and to their content by hash, and reads join the live documents, so
rows left behind by a program that does not keep them (the original) are never served.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from adapters.sqlite.driver import Connection
from adapters.sqlite.schema import vec_table_dimensions
from adapters.storage.sql_rows import chunk_from_row
from domain.ports import ChunkRow, DocumentCut

CHUNKS_DDL = """
    CREATE TABLE IF NOT EXISTS pyqmd_chunks (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      doc_id INTEGER NOT NULL,
      hash TEXT NOT NULL,
      seq INTEGER NOT NULL,
      heading_path TEXT NOT NULL,
      start_line INTEGER NOT NULL,
      end_line INTEGER NOT NULL,
      text TEXT NOT NULL,
      UNIQUE(doc_id, seq)
    )
"""

NAMESPACES_DDL = """
    CREATE TABLE IF NOT EXISTS pyqmd_namespaces (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      name TEXT NOT NULL UNIQUE
    )
"""

SUMMARIES_DDL = """
    CREATE TABLE IF NOT EXISTS pyqmd_session_summaries (
      session_id TEXT PRIMARY KEY,
      summary_json TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )
"""

_LIVE = (
    "SELECT c.id, d.collection, d.path, c.seq, c.heading_path, c.start_line, c.end_line, c.text "
    "FROM pyqmd_chunks c JOIN documents d ON d.id = c.doc_id AND d.hash = c.hash "
    "AND d.active = 1"
)
_ID_BATCH = 500


PROJMEM_TABLES = frozenset({"pyqmd_chunks", "pyqmd_namespaces", "pyqmd_session_summaries"})


def ensure_projmem_tables(conn: Connection) -> None:
    if conn.schema_names >= PROJMEM_TABLES:  # the schema probe on open saw them all
        return
    for ddl in (CHUNKS_DDL, NAMESPACES_DDL, SUMMARIES_DDL):
        conn.execute(ddl)


class SqliteChunkIndex:
    """ChunkIndex, NamespaceRegistry and SummaryStore over one open index connection."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        ensure_projmem_tables(conn)

    # ---------------------------------------------------------------- chunks

    def unchunked_documents(self) -> list[tuple[int, str]]:
        rows = self._conn.query(
            "SELECT d.id, d.hash FROM documents d WHERE d.active = 1 AND NOT EXISTS ("
            "SELECT 1 FROM pyqmd_chunks c WHERE c.doc_id = d.id AND c.hash = d.hash) "
            "ORDER BY d.id"
        )
        return [(int(doc_id), str(hash_)) for doc_id, hash_ in rows]

    def prune(self) -> int:
        return int(
            self._conn.execute(
                "DELETE FROM pyqmd_chunks WHERE NOT EXISTS (SELECT 1 FROM documents d "
                "WHERE d.id = pyqmd_chunks.doc_id AND d.hash = pyqmd_chunks.hash "
                "AND d.active = 1)"
            ).rowcount
        )

    def replace_chunks(self, cuts: Sequence[DocumentCut]) -> None:
        with self._conn.transaction():
            self._delete_documents([cut.doc_id for cut in cuts])
            self._conn.executemany(
                "INSERT INTO pyqmd_chunks (doc_id, hash, seq, heading_path, start_line, "
                "end_line, text) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (cut.doc_id, cut.content_hash, *section)
                    for cut in cuts
                    for section in cut.sections
                ],
            )

    def _delete_documents(self, doc_ids: Sequence[int]) -> int:
        removed = 0
        with self._conn.transaction():
            for start in range(0, len(doc_ids), _ID_BATCH):
                part = [int(i) for i in doc_ids[start : start + _ID_BATCH]]
                removed += int(
                    self._conn.execute(
                        f"DELETE FROM pyqmd_chunks WHERE doc_id IN ({','.join('?' * len(part))})",
                        part,
                    ).rowcount
                )
        return removed

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[ChunkRow]:
        found: dict[int, ChunkRow] = {}
        wanted = [int(i) for i in chunk_ids]
        for start in range(0, len(wanted), _ID_BATCH):
            part = wanted[start : start + _ID_BATCH]
            for row in self._conn.query(
                f"{_LIVE} WHERE c.id IN ({','.join('?' * len(part))})", part
            ):
                found[int(row[0])] = chunk_from_row(row)
        return [found[i] for i in wanted if i in found]

    def document_chunks(self, collection: str, path: str) -> list[ChunkRow]:
        rows = self._conn.query(
            f"{_LIVE} WHERE d.collection = ? AND d.path = ? ORDER BY c.seq", (collection, path)
        )
        return [chunk_from_row(r) for r in rows]

    def live_chunk_count(self, collections: Sequence[str] | None = None) -> int:
        live = (
            "SELECT COUNT(*) FROM pyqmd_chunks c JOIN documents d ON d.id = c.doc_id "
            "AND d.hash = c.hash AND d.active = 1"
        )
        if collections is None:
            return int(self._conn.scalar(live) or 0)
        names = list(dict.fromkeys(collections))
        total = 0
        for start in range(0, len(names), _ID_BATCH):
            part = names[start : start + _ID_BATCH]
            marks = ",".join("?" * len(part))
            total += int(self._conn.scalar(f"{live} WHERE d.collection IN ({marks})", part) or 0)
        return total

    # ---------------------------------------------------------------- namespaces

    def namespace_ids(self, names: Sequence[str]) -> dict[str, int]:
        known = {
            str(n): int(i) for i, n in self._conn.query("SELECT id, name FROM pyqmd_namespaces")
        }
        missing = [n for n in dict.fromkeys(names) if n not in known]
        if missing:
            with self._conn.transaction():
                self._conn.executemany(
                    "INSERT OR IGNORE INTO pyqmd_namespaces (name) VALUES (?)",
                    [(n,) for n in missing],
                )
            known = {
                str(n): int(i) for i, n in self._conn.query("SELECT id, name FROM pyqmd_namespaces")
            }
        return {n: known[n] for n in names}

    # ---------------------------------------------------------------- figures

    def llm_cache_entries(self) -> int:
        return int(self._conn.scalar("SELECT COUNT(*) FROM llm_cache") or 0)

    def embedding_dimensions(self) -> int | None:
        return vec_table_dimensions(self._conn)

    # ---------------------------------------------------------------- session summaries

    def get_summary(self, session_id: str) -> str | None:
        value = self._conn.scalar(
            "SELECT summary_json FROM pyqmd_session_summaries WHERE session_id = ?", (session_id,)
        )
        return None if value is None else str(value)

    def put_summary(self, session_id: str, summary_json: str, updated_at: str) -> None:
        self._conn.execute(
            "INSERT INTO pyqmd_session_summaries (session_id, summary_json, updated_at) "
            "VALUES (?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
            "summary_json = excluded.summary_json, updated_at = excluded.updated_at",
            (session_id, summary_json, updated_at),
        )

    def summarized_ids(self) -> set[str]:
        return {
            str(r[0]) for r in self._conn.query("SELECT session_id FROM pyqmd_session_summaries")
        }


if TYPE_CHECKING:  # structural conformance, checked by mypy
    from domain.ports import ChunkIndex, NamespaceRegistry, SummaryStore

    def _conforms(index: SqliteChunkIndex) -> None:
        _chunks: ChunkIndex = index
        _names: NamespaceRegistry = index
        _summaries: SummaryStore = index
