"""Chunk rows, namespaces and session summaries on PostgreSQL (projmem's ChunkIndex,
NamespaceRegistry and SummaryStore), as `adapters.sqlite.chunks` on SQLite."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.postgres.bulk import copy_rows
from adapters.postgres.connection import PgConnections
from adapters.storage.sql_rows import chunk_from_row as _chunk_row
from domain.ports import ChunkRow, DocumentCut

_LIVE_CHUNKS = (
    "SELECT c.id, d.collection, d.path, c.seq, c.heading_path, c.start_line, c.end_line, c.text "
    "FROM pyqmd_chunks c JOIN documents d ON d.id = c.doc_id AND d.hash = c.hash "
    "AND d.active = 1"
)

_CHUNK_COPY_COLUMNS = (
    ("doc_id", "int8"),
    ("hash", "text"),
    ("seq", "int4"),
    ("heading_path", "text"),
    ("start_line", "int4"),
    ("end_line", "int4"),
    ("text", "text"),
)


class PgChunkIndex(PgConnections):
    """ChunkIndex, NamespaceRegistry and SummaryStore over the pool."""

    def unchunked_documents(self) -> list[tuple[int, str]]:
        rows = self._query(
            "SELECT d.id, d.hash FROM documents d WHERE d.active = 1 AND NOT EXISTS ("
            "SELECT 1 FROM pyqmd_chunks c WHERE c.doc_id = d.id AND c.hash = d.hash) "
            "ORDER BY d.id"
        )
        return [(int(doc_id), str(hash_)) for doc_id, hash_ in rows]

    def prune(self) -> int:
        return self._execute(
            "DELETE FROM pyqmd_chunks c WHERE NOT EXISTS (SELECT 1 FROM documents d "
            "WHERE d.id = c.doc_id AND d.hash = c.hash AND d.active = 1)"
        )

    def replace_chunks(self, cuts: Sequence[DocumentCut]) -> None:
        """One transaction: the documents' rows go, their sections come in with new ids
        (COPY, as an update writes every document's rows)."""
        if not cuts:
            return
        with self.transaction(), self._conn() as conn:
            conn.execute(
                "DELETE FROM pyqmd_chunks WHERE doc_id = ANY(%s)",
                (sorted({int(cut.doc_id) for cut in cuts}),),
            )
            copy_rows(
                conn,
                "pyqmd_chunks",
                _CHUNK_COPY_COLUMNS,
                (
                    (cut.doc_id, cut.content_hash, *section)
                    for cut in cuts
                    for section in cut.sections
                ),
            )

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[ChunkRow]:
        wanted = [int(i) for i in chunk_ids]
        rows = self._query(f"{_LIVE_CHUNKS} WHERE c.id = ANY(%s)", (sorted(set(wanted)),))
        found = {int(r[0]): _chunk_row(r) for r in rows}
        return [found[i] for i in wanted if i in found]

    def document_chunks(self, collection: str, path: str) -> list[ChunkRow]:
        rows = self._query(
            f"{_LIVE_CHUNKS} WHERE d.collection = %s AND d.path = %s ORDER BY c.seq",
            (collection, path),
        )
        return [_chunk_row(r) for r in rows]

    def live_chunk_count(self, collections: Sequence[str] | None = None) -> int:
        live = (
            "SELECT COUNT(*) FROM pyqmd_chunks c JOIN documents d ON d.id = c.doc_id "
            "AND d.hash = c.hash AND d.active = 1"
        )
        if collections is None:
            return int(self._scalar(live) or 0)
        return int(self._scalar(f"{live} WHERE d.collection = ANY(%s)", (list(collections),)) or 0)

    def namespace_ids(self, names: Sequence[str]) -> dict[str, int]:
        wanted = list(dict.fromkeys(names))
        with self.transaction(), self._conn() as conn:
            conn.execute(
                "INSERT INTO pyqmd_namespaces (name) SELECT unnest(%s::text[]) "
                "ON CONFLICT (name) DO NOTHING",
                (wanted,),
            )
            rows = conn.execute(
                "SELECT name, id FROM pyqmd_namespaces WHERE name = ANY(%s)", (wanted,)
            ).fetchall()
        known = {str(name): int(i) for name, i in rows}
        return {name: known[name] for name in names}

    def llm_cache_entries(self) -> int:
        return int(self._scalar("SELECT COUNT(*) FROM llm_cache") or 0)

    def embedding_dimensions(self) -> int | None:
        return self.vector_dimensions()

    def get_summary(self, session_id: str) -> str | None:
        value = self._scalar(
            "SELECT summary_json FROM pyqmd_session_summaries WHERE session_id = %s",
            (session_id,),
        )
        return None if value is None else str(value)

    def put_summary(self, session_id: str, summary_json: str, updated_at: str) -> None:
        self._execute(
            "INSERT INTO pyqmd_session_summaries (session_id, summary_json, updated_at) "
            "VALUES (%s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET "
            "summary_json = excluded.summary_json, updated_at = excluded.updated_at",
            (session_id, summary_json, updated_at),
        )

    def summarized_ids(self) -> set[str]:
        return {str(r[0]) for r in self._query("SELECT session_id FROM pyqmd_session_summaries")}
