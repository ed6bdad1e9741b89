"""Embeddings on PostgreSQL (the VectorIndex port): pgvector rows and their HNSW index."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import psycopg

from adapters.postgres.connection import PgConnections, pyformat
from adapters.postgres.schema import VECTORS_HNSW_DDL, vectors_ddl
from adapters.storage.sql_rows import META_COLUMNS as _META_COLUMNS
from adapters.storage.sql_rows import meta_from_row as _meta
from adapters.storage.sql_vectors import (
    CONTENT_VECTOR_COLUMNS,
    STORED_VECTOR_MODELS,
    check_query,
    chunk_dimensions,
    content_vector_rows,
    mismatch,
    pending_count_sql,
    pending_hashes_sql,
    pending_params,
)
from domain.model import Document, VectorHit

_STORED_VECTOR_MODELS = pyformat(STORED_VECTOR_MODELS)


@functools.cache
def _pending_hashes(sets: int) -> str:
    return pyformat(pending_hashes_sql(' COLLATE "C"', sets))


@functools.cache
def _pending_count(sets: int) -> str:
    return pyformat(pending_count_sql(sets))


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class PgVectors(PgConnections):
    """VectorIndex over the pool."""

    def stored_vector_models(self) -> list[str]:
        return [str(r[0]) for r in self._query(_STORED_VECTOR_MODELS)]

    def pending_hashes(
        self, model: str, fingerprint: str, *, also: Sequence[tuple[str, str]] = ()
    ) -> list[str]:
        sets, params = pending_params(model, fingerprint, also)
        return [str(r[0]) for r in self._query(_pending_hashes(sets), params)]

    def pending_count(
        self, model: str, fingerprint: str, *, also: Sequence[tuple[str, str]] = ()
    ) -> int:
        sets, params = pending_params(model, fingerprint, also)
        return int(self._scalar(_pending_count(sets), params) or 0)

    def ensure_vector_table(self, conn: psycopg.Connection[tuple[Any, ...]], dims: int) -> None:
        if self.has_vector_index():
            existing = self.vector_dimensions()
            if existing is not None and existing != dims:
                raise mismatch(existing, dims)
            return
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('qmd-vectors:' || current_schema()))")
        if conn.execute("SELECT to_regclass('vectors_vec')").fetchone() not in (None, (None,)):
            return
        for statement in vectors_ddl(dims):
            conn.execute(statement)

    def store_chunk_vectors(
        self,
        content_hash: str,
        chunks: Sequence[tuple[int, int, Sequence[float]]],
        model: str,
        fingerprint: str,
        embedded_at: str,
    ) -> None:
        if not chunks:
            return
        dims = chunk_dimensions(chunks)
        with self.transaction(), self._conn() as conn:
            self.ensure_vector_table(conn, dims)
            conn.execute("DELETE FROM vectors_vec WHERE hash = %s", (content_hash,))
            conn.execute("DELETE FROM content_vectors WHERE hash = %s", (content_hash,))
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO content_vectors ({CONTENT_VECTOR_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (hash, seq) DO UPDATE SET pos = excluded.pos, "
                    "model = excluded.model, embed_fingerprint = excluded.embed_fingerprint, "
                    "total_chunks = excluded.total_chunks, embedded_at = excluded.embedded_at",
                    content_vector_rows(content_hash, chunks, model, fingerprint, embedded_at),
                )
                cur.executemany(
                    "INSERT INTO vectors_vec (hash, seq, embedding) VALUES (%s, %s, %s::vector) "
                    "ON CONFLICT (hash, seq) DO UPDATE SET embedding = excluded.embedding",
                    [(content_hash, int(seq), vector_literal(vec)) for seq, _, vec in chunks],
                )

    def clear_vectors(self) -> None:
        with self.transaction(), self._conn() as conn:
            conn.execute("DELETE FROM content_vectors")
            conn.execute("DROP TABLE IF EXISTS vectors_vec")

    def search_vectors(
        self,
        vector: Sequence[float],
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[VectorHit]:
        """Best chunk per document by cosine distance, ascending, from the HNSW index.
        `within`: only these document ids (a metadata filter), applied inside the scan.

        With a collection, pgvector's iterative scan keeps walking the graph until enough of
        the collection's own chunks are found, so a small collection is not starved by a
        crowded one (the SQLite adapter's exact-scan fallback, done by the index)."""
        if limit <= 0 or not self.has_vector_index():
            return []
        check_query(self.vector_dimensions(), vector)
        literal = vector_literal(vector)
        wanted = max(limit * 3, limit)
        member = ""
        params: list[Any] = [literal]
        if collection or within is not None:
            member = (
                " WHERE EXISTS (SELECT 1 FROM documents d0 WHERE d0.hash = v.hash AND d0.active = 1"
            )
            if collection:
                member += " AND d0.collection = %s"
                params.append(collection)
            if within is not None:
                member += " AND d0.id = ANY(%s)"
                params.append(sorted(within))
            member += ")"
        params += [literal, wanted]
        statement = (
            "WITH knn AS (SELECT v.hash, v.seq, v.embedding <=> %s::vector AS distance"
            f" FROM vectors_vec v{member} ORDER BY v.embedding <=> %s::vector LIMIT %s)"
            f" SELECT knn.distance, cv.pos, {_META_COLUMNS}, content.doc FROM knn"
            " JOIN content_vectors cv ON cv.hash = knn.hash AND cv.seq = knn.seq"
            " JOIN documents d ON d.hash = knn.hash AND d.active = 1"
            " JOIN content ON content.hash = d.hash"
        )
        where = []
        if collection:
            where.append("d.collection = %s")
            params.append(collection)
        if within is not None:
            where.append("d.id = ANY(%s)")
            params.append(sorted(within))
        if where:
            statement += " WHERE " + " AND ".join(where)
        statement += " ORDER BY knn.distance, d.id"
        with self.transaction(), self._conn() as conn:
            ef = max(self._ef_search, wanted)
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
            if collection or within is not None:
                conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
            rows = conn.execute(statement, params).fetchall()
        best: dict[tuple[str, str], VectorHit] = {}
        for row in rows:
            meta = _meta(row[2:10])
            key = (meta.collection, meta.path)
            if key in best:
                continue  # rows come nearest first: the first chunk seen is the best one
            best[key] = VectorHit(
                document=Document(meta=meta, body=str(row[10])),
                distance=float(row[0]),
                chunk_pos=int(row[1]),
            )
        return list(best.values())[:limit]

    def rebuild_vector_index(self) -> None:
        """Drop and rebuild the HNSW index (after a bulk load: one build beats many inserts)."""
        with self.transaction(), self._conn() as conn:
            conn.execute("DROP INDEX IF EXISTS idx_vectors_vec_hnsw")
            conn.execute(VECTORS_HNSW_DDL)
