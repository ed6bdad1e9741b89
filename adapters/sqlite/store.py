"""`SqliteIndex`: the original QMD index file behind the DocumentStore, IndexMaintenance,
LexicalIndex, VectorIndex, MetadataIndex and LlmCache ports.

The file layout, SQL and write rules follow QMD 2.8.3 (`src/store.ts`) so the original and this
adapter can read and write each other's index.
"""

from __future__ import annotations

import json
import math
import os
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from adapters.sqlite import vector_bits
from adapters.sqlite.driver import Connection, DatabaseError, OperationalError, connect
from adapters.sqlite.lexical import SqliteLexical
from adapters.sqlite.metadata import SqliteMetadata, delete_orphaned_metadata
from adapters.sqlite.schema import (
    ensure_schema,
    ensure_vec_table,
    vec_table_dimensions,
    vec_table_sql,
)
from adapters.storage.sql_catalog import Catalog
from adapters.storage.sql_documents import TIDY_SHARE, DocumentDialect, DocumentWrites, Writing
from adapters.storage.sql_rows import (
    LLM_CACHE_KEEP,
    escape_like,
)
from adapters.storage.sql_rows import META_COLUMNS as _META_COLUMNS
from adapters.storage.sql_rows import META_FROM as _META_FROM
from adapters.storage.sql_rows import ORPHAN_VECTOR_COUNT as _ORPHAN_VECTOR_COUNT
from adapters.storage.sql_rows import meta_from_row as _meta
from adapters.storage.sql_rows import now_iso as _now_iso
from adapters.storage.sql_vectors import (
    CONTENT_VECTOR_COLUMNS,
    EMBEDDED_BY_MODEL,
    PENDING_COUNT,
    VECTOR_COUNT,
    check_query,
    chunk_dimensions,
    content_vector_rows,
    pending_hashes_sql,
)
from domain.errors import CONFLICT, UNAVAILABLE, QmdError
from domain.lexquery import space_cjk
from domain.model import Document, DocumentMeta, VectorHit
from domain.ports import CollectionCount

COLLECTION_VEC_EXACT_SCAN_MAX = 20_000
# Below this many vectors an exact scan is fast enough: no prefilter (REQ-VEC-PREFILTER-002).
PREFILTER_MIN_VECTORS = 20_000
# Hamming candidates per wanted chunk, and at least this many (REQ-VEC-PREFILTER-001).
# sqlite-vec 0.1's KNN costs O(vectors x k) (its per-chunk top-k selection), so k stays small.
PREFILTER_OVERSAMPLE = 4
PREFILTER_MIN_CANDIDATES = 64
SQLITE_VEC_MAX_K = 4096
# mapped, not read: the prefilter's rescoring (see _sign_candidates); SQLite caps it at its
# compile-time maximum
MMAP_SIZE = 1 << 40
HASH_SEQ_CHUNK = 400


def _pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *(float(x) for x in vector))


class SqliteIndex(SqliteLexical, SqliteMetadata, Catalog, DocumentWrites):
    """One open index file. Every public method is a complete unit of work.

    Assembled from one part per concern on the file's one connection (`ConnectionPart`, listed
    before the shared `Catalog` so that its `_select` and `_write` run the shared statements):
    `lexical`, `metadata`; documents, vectors and the LLM cache stay here."""

    # the documents_au trigger drops a deactivated document's full-text row
    _DOCUMENTS = DocumentDialect(
        insert_content="INSERT OR IGNORE INTO content (hash, doc, created_at) VALUES (?, ?, ?)",
        returning_id=False,
        unindex=None,
    )

    def __init__(
        self, conn: Connection, prefilter_min_vectors: int = PREFILTER_MIN_VECTORS
    ) -> None:
        self._conn = conn
        self._prefilter_min_vectors = prefilter_min_vectors
        # The prefilter's bits in memory: this process's copy for the file
        # (sign_scan.SharedSigns), taken by the first search that uses them; False: they
        # cannot be read so.
        self._signs: Any = None
        ensure_schema(conn, space_cjk)

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], env: Mapping[str, str] | None = None
    ) -> SqliteIndex:
        return cls(connect(path, env))

    # ------------------------------------------------------------------ plumbing

    @property
    def connection(self) -> Connection:
        return self._conn

    @property
    def path(self) -> str:
        return self._conn.path

    @property
    def vec_available(self) -> bool:
        return self._conn.vec_available

    @property
    def lexical_ranking(self) -> str:
        self._conn.load_rank_function()  # what a connection that ranks again would load
        if self._conn.rank_error is None:
            return (
                f"{self._conn.rank_function} from a connection's second search on "
                "(row lengths kept in memory)"
            )
        return f"FTS5 {self._conn.rank_function}: {self._conn.rank_error}"

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group many writes (e.g. a whole `update`) into one commit; calls nest."""
        with self._conn.transaction():
            yield

    def close(self) -> None:
        self._signs = None  # the process's copy goes when no open index holds it
        self._conn.close()

    def __enter__(self) -> SqliteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_fts(self, doc_id: int) -> None:
        """Replace the FTS row of one document with its CJK-normalised columns (active only)."""
        row = self._conn.raw.execute(
            "SELECT d.collection, d.path, d.title, content.doc FROM documents d "
            "JOIN content ON content.hash = d.hash WHERE d.id = ? AND d.active = 1",
            (doc_id,),
        ).fetchone()
        self._conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (doc_id,))
        if row is None:
            return
        collection, path, title, body = row
        self._conn.execute(
            "INSERT INTO documents_fts(rowid, filepath, title, body) VALUES (?, ?, ?, ?)",
            (doc_id, space_cjk(f"{collection}/{path}"), space_cjk(title), space_cjk(body)),
        )

    # ------------------------------------------------------------------ collections

    def delete_collection(self, name: str) -> int:
        """Hard-delete the collection's document rows, unpinned content and its config row.

        Returns the number of document rows deleted (the original's `deletedDocs`).
        """
        with self._conn.transaction():
            deleted = self._conn.execute(
                "DELETE FROM documents WHERE collection = ?", (name,)
            ).rowcount
            self._conn.execute(
                "DELETE FROM content WHERE hash NOT IN "
                "(SELECT DISTINCT hash FROM documents WHERE active = 1)"
            )
            self._conn.execute("DELETE FROM store_collections WHERE name = ?", (name,))
            delete_orphaned_metadata(self._conn)
        return int(deleted)

    def rename_collection(self, old: str, new: str) -> None:
        with self._conn.transaction():
            if old != new and self._conn.scalar(
                "SELECT name FROM store_collections WHERE name = ?", (new,)
            ):
                raise QmdError(CONFLICT, f"Collection '{new}' already exists")
            self._conn.execute(
                "UPDATE documents SET collection = ? WHERE collection = ?", (new, old)
            )
            self._conn.execute("UPDATE store_collections SET name = ? WHERE name = ?", (new, old))
            for (doc_id,) in self._conn.query(
                "SELECT id FROM documents WHERE collection = ? AND active = 1", (new,)
            ):
                self._write_fts(int(doc_id))

    # ------------------------------------------------------------------ indexing

    def active_documents(self, collection: str) -> dict[str, DocumentMeta]:
        # no LENGTH(content.doc): it reads every body, most of a no-op update's time
        rows = self._conn.query(
            "SELECT d.id, d.collection, d.path, d.title, d.hash, d.created_at, d.modified_at, 0 "
            f"{_META_FROM} WHERE d.collection = ? AND d.active = 1 ORDER BY d.id",
            (collection,),
        )
        return {str(r[2]): _meta(r) for r in rows}

    @contextmanager
    def _writing(self) -> Iterator[Writing]:
        with self._conn.transaction():
            yield self._conn, self._write_fts

    def tidy_lexical_index(self, documents_written: int) -> None:
        """Merge FTS5's segments into one when the run wrote at least 1/`TIDY_SHARE` of the
        index (REQ-INDEX-FTS-TIDY-001). FTS5 adds a segment for every flush of its write
        buffer, and every MATCH looks each term up in every segment: a 5,000-document index
        built in one run held 14 segments, and one segment made its searches' statements 2 to
        3 times faster. Small runs are left to FTS5's own merging (a few small segments): a
        full merge rewrites the whole index (about 0.1 s per 5,000 documents)."""
        if documents_written <= 0:
            return
        if documents_written * TIDY_SHARE < self.total_documents():
            return
        try:
            self._conn.execute("INSERT INTO documents_fts(documents_fts) VALUES('optimize')")
        except DatabaseError as exc:
            if "no such table" not in str(exc).lower():
                raise

    def delete_orphan_content(self) -> int:
        cursor = self._conn.execute(
            "DELETE FROM content WHERE hash NOT IN (SELECT DISTINCT hash FROM documents)"
        )
        return int(cursor.rowcount)

    # ------------------------------------------------------------------ lookups

    def document_by_docid(self, prefix: str) -> DocumentMeta | None:
        if not prefix:
            return None
        return self._one("d.hash LIKE ? ESCAPE '#'", (escape_like(prefix) + "%",))

    def document_by_suffix(self, suffix: str) -> DocumentMeta | None:
        """Unanchored, ASCII-case-insensitive `qmd://c/p LIKE '%suffix'` (the original's quirk)."""
        return self._one(
            "'qmd://' || d.collection || '/' || d.path LIKE ? ESCAPE '#'",
            ("%" + escape_like(suffix),),
        )

    # ------------------------------------------------------------------ status and upkeep

    def collection_counts(self) -> list[CollectionCount]:
        rows = self._conn.query(
            "SELECT collection, COUNT(*), MAX(modified_at) FROM documents WHERE active = 1 "
            "GROUP BY collection"
        )
        return [CollectionCount(str(r[0]), int(r[1]), str(r[2] or "")) for r in rows]

    def vector_count(self) -> int:
        """Stored chunk vectors of active documents (orphans of removed ones not counted)."""
        return int(self._conn.scalar(VECTOR_COUNT) or 0)

    def embedded_by_model(self) -> dict[str, int]:
        rows = self._conn.query(EMBEDDED_BY_MODEL)
        return {str(model): int(count) for model, count in rows}

    def cleanup(self) -> dict[str, int]:
        """`qmd cleanup`: llm_cache, orphaned vectors, inactive rows, orphan content, optimize,
        VACUUM. Keys: cache_entries, orphaned_vectors, inactive_documents, orphaned_content."""
        cache = int(self._conn.execute("DELETE FROM llm_cache").rowcount)
        vectors = self._cleanup_orphaned_vectors()
        inactive = int(self._conn.execute("DELETE FROM documents WHERE active = 0").rowcount)
        delete_orphaned_metadata(self._conn)
        orphaned = self.delete_orphan_content()
        try:
            self._conn.execute("INSERT INTO documents_fts(documents_fts) VALUES('optimize')")
        except DatabaseError as exc:
            if "no such table" not in str(exc).lower():
                raise
        self._conn.execute("VACUUM")
        return {
            "cache_entries": cache,
            "orphaned_vectors": vectors,
            "inactive_documents": inactive,
            "orphaned_content": orphaned,
        }

    def _cleanup_orphaned_vectors(self) -> int:
        if not self._conn.vec_available or vec_table_sql(self._conn) is None:
            return 0
        with self._conn.transaction():
            orphaned = int(self._conn.scalar(_ORPHAN_VECTOR_COUNT) or 0)
            if orphaned == 0:
                return 0
            in_step = self._bits_in_step()
            orphans = (
                "SELECT cv.hash || '_' || cv.seq FROM content_vectors cv WHERE NOT EXISTS ("
                "SELECT 1 FROM documents d WHERE d.hash = cv.hash AND d.active = 1)"
            )
            self._conn.execute(f"DELETE FROM vectors_vec WHERE hash_seq IN ({orphans})")
            if in_step is not None:
                self._conn.execute(
                    f"DELETE FROM {vector_bits.BITS_TABLE} WHERE hash_seq IN ({orphans})"
                )
                vector_bits.record_signature(self._conn)
            self._conn.execute(
                "DELETE FROM content_vectors WHERE hash NOT IN "
                "(SELECT hash FROM documents WHERE active = 1)"
            )
            return orphaned

    # ------------------------------------------------------------------ vectors

    def has_vector_index(self) -> bool:
        return vec_table_sql(self._conn) is not None

    def vector_dimensions(self) -> int | None:
        return vec_table_dimensions(self._conn)

    def pending_hashes(self, model: str, fingerprint: str) -> list[str]:
        """Active hashes lacking a complete vector set for (model, fingerprint), by MIN(path)."""
        rows = self._conn.query(pending_hashes_sql(), (model, fingerprint))
        return [str(r[0]) for r in rows]

    def pending_count(self, model: str, fingerprint: str) -> int:
        """How many hashes `pending_hashes` would list, without listing them (for status)."""
        return int(self._conn.scalar(PENDING_COUNT, (model, fingerprint)))

    def store_chunk_vectors(
        self,
        content_hash: str,
        chunks: Sequence[tuple[int, int, Sequence[float]]],
        model: str,
        fingerprint: str,
        embedded_at: str,
    ) -> None:
        """Replace every vector of `content_hash` with `chunks` = (seq, pos, embedding)."""
        if not chunks:
            return
        dims = chunk_dimensions(chunks)
        with self._conn.transaction():
            ensure_vec_table(self._conn, dims)
            in_step = self._bits_in_step()
            old_seqs = self._conn.query(
                "SELECT seq FROM content_vectors WHERE hash = ?", (content_hash,)
            )
            keys = {f"{content_hash}_{int(r[0])}" for r in old_seqs}
            keys.update(f"{content_hash}_{int(seq)}" for seq, _, _ in chunks)
            replaced = vector_bits.present(self._conn, sorted(keys)) if in_step is not None else 0
            self._conn.executemany(
                "DELETE FROM vectors_vec WHERE hash_seq = ?", [(k,) for k in sorted(keys)]
            )
            self._conn.execute("DELETE FROM content_vectors WHERE hash = ?", (content_hash,))
            self._conn.executemany(
                f"INSERT OR REPLACE INTO content_vectors ({CONTENT_VECTOR_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                content_vector_rows(content_hash, chunks, model, fingerprint, embedded_at),
            )
            added = [(f"{content_hash}_{int(seq)}", _pack(vector)) for seq, _, vector in chunks]
            self._conn.executemany(
                "INSERT INTO vectors_vec (hash_seq, embedding) VALUES (?, ?)", added
            )
            if in_step is None:
                # first write here, or vectors written by another program: quantize them all
                vector_bits.rebuild(self._conn, dims)
            else:
                # the count comes from the file, inside this transaction: a rollback of an
                # outer transaction takes it back with the rows (no count kept in memory)
                count = in_step - replaced + len(added)
                vector_bits.replace(self._conn, sorted(keys), added, dims, count)

    def refresh_vector_prefilter(self) -> None:
        """Bring the prefilter's bits in step with `vectors_vec` (after a bulk load that wrote
        `vectors_vec` directly, e.g. `qmd index copy`)."""
        dims = self.vector_dimensions()
        if not self._conn.vec_available or dims is None:
            return
        with self._conn.transaction():
            # the full check: it also finds vectors another program deleted
            if vector_bits.in_step(self._conn) is None:
                vector_bits.rebuild(self._conn, dims)

    def _bits_in_step(self) -> int | None:
        """The vector count when the prefilter's bits hold every vector, else None."""
        found = vector_bits.state(self._conn)
        return None if found is None else found[0]

    def clear_vectors(self) -> None:
        """`qmd embed -f`: forget every vector and drop vectors_vec (recreated on next store)."""
        with self._conn.transaction():
            self._conn.execute("DELETE FROM content_vectors")
            if vec_table_sql(self._conn) is not None:
                if not self._conn.vec_available:
                    raise QmdError(UNAVAILABLE, "sqlite-vec extension is unavailable.")
                self._conn.execute("DROP TABLE IF EXISTS vectors_vec")
            vector_bits.drop(self._conn)

    def search_vectors(
        self,
        vector: Sequence[float],
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[VectorHit]:
        """Best chunk per document by cosine distance, ascending (the original's `searchVec`).

        With `within`, the nearest chunks are searched among those documents' chunks only
        (REQ-FILTER-003), never picked from a global top k.
        """
        if limit <= 0 or not self._conn.vec_available or not self.has_vector_index():
            return []
        if within is not None and not within:
            return []
        check_query(self.vector_dimensions(), vector)
        blob = _pack(vector)
        wanted = max(limit * 3, limit)
        if within is not None:
            scored = self._nearest_within(blob, within, collection, wanted)
        elif collection:
            if self._small_collection(collection):
                scored = self._nearest_in_collection(blob, collection, wanted)
            else:
                # The original's large-collection rule: a wide KNN, then the filter below.
                scored = self._ann(blob, max(limit * 30, limit * 3))
        else:
            scored = self._ann(blob, wanted)
        if not scored:
            return []
        distances = dict(scored)
        best: dict[tuple[str, str], tuple[float, int, tuple[Any, ...]]] = {}
        for row in self._chunk_rows(list(distances), collection, within):
            distance = float(distances[f"{row[0]}_{row[1]}"])
            key = (str(row[4]), str(row[5]))
            current = best.get(key)
            if current is None or distance < current[0]:
                best[key] = (distance, int(row[2]), row)
        ranked = sorted(best.values(), key=lambda item: item[0])[:limit]
        return [
            VectorHit(
                document=Document(meta=_meta(row[3:11]), body=str(row[11])),
                distance=distance,
                chunk_pos=pos,
            )
            for distance, pos, row in ranked
        ]

    def _small_collection(self, collection: str) -> bool:
        """At most COLLECTION_VEC_EXACT_SCAN_MAX vectors (counting the collection's own only
        when the whole index has more: that count joins every vector row)."""
        total = int(self._conn.scalar("SELECT COUNT(*) FROM content_vectors") or 0)
        if total <= COLLECTION_VEC_EXACT_SCAN_MAX:
            return True
        members = self._conn.scalar(
            "SELECT COUNT(*) FROM content_vectors cv "
            "JOIN documents d ON d.hash = cv.hash AND d.active = 1 WHERE d.collection = ?",
            (collection,),
        )
        return int(members or 0) <= COLLECTION_VEC_EXACT_SCAN_MAX

    def _chunk_rows(
        self,
        hash_seqs: Sequence[str],
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[tuple[Any, ...]]:
        """(hash, seq, pos, document columns…, body) of active documents holding these chunks.

        Looked up by `hash` (indexed) and matched on `seq` here: a condition on the
        `hash || '_' || seq` expression cannot use an index and scanned every vector row.
        """
        wanted = set(hash_seqs)
        hashes = sorted({key.rsplit("_", 1)[0] for key in hash_seqs})
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(hashes), HASH_SEQ_CHUNK):
            part = hashes[start : start + HASH_SEQ_CHUNK]
            sql = (
                f"SELECT cv.hash, cv.seq, cv.pos, {_META_COLUMNS}, content.doc "
                "FROM content_vectors cv JOIN documents d ON d.hash = cv.hash AND d.active = 1 "
                "JOIN content ON content.hash = d.hash "
                f"WHERE cv.hash IN ({','.join('?' * len(part))})"
            )
            params: list[Any] = list(part)
            if collection:
                sql += " AND d.collection = ?"
                params.append(collection)
            if within is not None:
                sql += " AND d.id IN (SELECT value FROM json_each(?))"
                params.append(json.dumps(sorted(within)))
            rows.extend(
                row
                for row in self._conn.query(sql + " ORDER BY d.id, cv.seq", params)
                if f"{row[0]}_{row[1]}" in wanted
            )
        return rows

    def _nearest_in_collection(
        self, blob: bytes, collection: str, wanted: int
    ) -> list[tuple[str, float]]:
        """The collection's `wanted` nearest chunks: what an exact scan of it would return.

        sqlite-vec's KNN is exhaustive, so the collection's chunks among the global top k are
        its own top chunks. k starts at `wanted` and grows until enough of them are found or
        every vector was returned; only when k reaches sqlite-vec's cap first does this fall
        back to scoring the collection's chunks one key at a time (slow: a lookup per key).
        """
        k = wanted
        while True:
            scored = self._ann(blob, k)
            members = self._in_collection([key for key, _ in scored], collection)
            inside = [(key, distance) for key, distance in scored if key in members]
            if len(inside) >= wanted or len(scored) < k:
                return inside[:wanted]
            if k >= SQLITE_VEC_MAX_K:
                return self._exact_scan(blob, collection, wanted)
            k = min(SQLITE_VEC_MAX_K, k * 4)

    def _in_collection(self, hash_seqs: Sequence[str], collection: str) -> set[str]:
        hashes = sorted({key.rsplit("_", 1)[0] for key in hash_seqs})
        found: set[str] = set()
        for start in range(0, len(hashes), HASH_SEQ_CHUNK):
            part = hashes[start : start + HASH_SEQ_CHUNK]
            for hash_, seq in self._conn.query(
                "SELECT DISTINCT cv.hash, cv.seq FROM content_vectors cv "
                "JOIN documents d ON d.hash = cv.hash AND d.active = 1 "
                f"WHERE d.collection = ? AND cv.hash IN ({','.join('?' * len(part))})",
                [collection, *part],
            ):
                found.add(f"{hash_}_{seq}")
        return found

    def _exact_scan(self, blob: bytes, collection: str, wanted: int) -> list[tuple[str, float]]:
        hash_seqs = [
            str(r[0])
            for r in self._conn.query(
                "SELECT DISTINCT cv.hash || '_' || cv.seq FROM content_vectors cv "
                "JOIN documents d ON d.hash = cv.hash AND d.active = 1 "
                "WHERE d.collection = ?",
                (collection,),
            )
        ]
        scored: list[tuple[str, float]] = []
        for start in range(0, len(hash_seqs), HASH_SEQ_CHUNK):
            part = hash_seqs[start : start + HASH_SEQ_CHUNK]
            placeholders = ",".join("?" * len(part))
            for key, distance in self._conn.query(
                "SELECT hash_seq, vec_distance_cosine(embedding, ?) FROM vectors_vec "
                f"WHERE hash_seq IN ({placeholders})",
                [blob, *part],
            ):
                d = float(distance) if distance is not None else math.inf
                scored.append((str(key), d))
        scored.sort(key=lambda item: item[1])
        return scored[:wanted]

    def _scope_keys(self, within: frozenset[int], collection: str | None) -> list[str]:
        """The chunk keys (hash_seq) of the active documents in `within` (and `collection`)."""
        sql = (
            "SELECT DISTINCT cv.hash || '_' || cv.seq FROM content_vectors cv "
            "JOIN documents d ON d.hash = cv.hash AND d.active = 1 "
            "WHERE d.id IN (SELECT value FROM json_each(?))"
        )
        params: list[Any] = [json.dumps(sorted(within))]
        if collection:
            sql += " AND d.collection = ?"
            params.append(collection)
        return [str(r[0]) for r in self._conn.query(sql, params)]

    def _nearest_within(
        self, blob: bytes, within: frozenset[int], collection: str | None, wanted: int
    ) -> list[tuple[str, float]]:
        """The `wanted` nearest chunks of the scope: an exact scan of its chunks when they are
        few, else a KNN widened until enough of its chunks are among the nearest."""
        keys = self._scope_keys(within, collection)
        if len(keys) <= COLLECTION_VEC_EXACT_SCAN_MAX:
            return self._score_keys(blob, keys)[:wanted]
        members = set(keys)
        k = wanted
        while True:
            scored = self._ann(blob, k)
            inside = [(key, distance) for key, distance in scored if key in members]
            if len(inside) >= wanted or len(scored) < k:
                return inside[:wanted]
            if k >= SQLITE_VEC_MAX_K:
                return self._score_keys(blob, keys)[:wanted]
            k = min(SQLITE_VEC_MAX_K, k * 4)

    def _score_keys(self, blob: bytes, hash_seqs: Sequence[str]) -> list[tuple[str, float]]:
        scored: list[tuple[str, float]] = []
        for start in range(0, len(hash_seqs), HASH_SEQ_CHUNK):
            part = hash_seqs[start : start + HASH_SEQ_CHUNK]
            for key, distance in self._conn.query(
                "SELECT hash_seq, vec_distance_cosine(embedding, ?) FROM vectors_vec "
                f"WHERE hash_seq IN ({','.join('?' * len(part))})",
                [blob, *part],
            ):
                scored.append((str(key), float(distance) if distance is not None else math.inf))
        scored.sort(key=lambda item: item[1])
        return scored

    def _rescore(self, blob: bytes, hash_seqs: Sequence[str]) -> list[tuple[str, float]]:
        """Exact distances of a few keys, one primary-key lookup each: sqlite-vec answers
        `hash_seq IN (...)` with a full scan."""
        scored: list[tuple[str, float]] = []
        for key in hash_seqs:
            distance = self._conn.scalar(
                "SELECT vec_distance_cosine(embedding, ?) FROM vectors_vec WHERE hash_seq = ?",
                (blob, key),
            )
            if distance is not None:  # a key without a vector is no neighbour
                scored.append((key, float(distance)))
        scored.sort(key=lambda item: item[1])
        return scored

    def _ann(self, blob: bytes, k: int) -> list[tuple[str, float]]:
        """The k nearest chunks. From `PREFILTER_MIN_VECTORS` vectors on (and bits in step),
        the nearest by Hamming distance of the sign bits are rescored with the full vectors:
        the answer is the exact one whenever those candidates hold the exact k nearest
        (REQ-VEC-PREFILTER-001); otherwise (or for a k too wide to oversample) an exact scan."""
        k = max(1, min(SQLITE_VEC_MAX_K, k))
        wanted = max(PREFILTER_MIN_CANDIDATES, k * PREFILTER_OVERSAMPLE)
        if wanted <= SQLITE_VEC_MAX_K:
            # one read transaction: the state checked and the bits read are of one snapshot
            with self._conn.transaction(immediate=False):
                # when this snapshot began (between the two; unknown inside a longer
                # transaction): the process's copy is never replaced by an older one
                since = time.monotonic_ns() if self._conn.transaction_depth == 1 else None
                found = vector_bits.state(self._conn)
                read_done = time.monotonic_ns()
                if found is not None and found[0] >= self._prefilter_min_vectors:
                    dims = len(blob) // 4
                    keys = self._sign_candidates(found[1], blob, dims, wanted, since, read_done)
                    if keys is None:
                        keys = vector_bits.candidates(self._conn, blob, dims, wanted)
                    return self._rescore(blob, keys)[:k]
        rows = self._conn.query(
            "SELECT hash_seq, distance FROM vectors_vec WHERE embedding MATCH ? AND k = ? "
            "ORDER BY distance",
            (blob, k),
        )
        return [(str(r[0]), float(r[1])) for r in rows]

    def _sign_candidates(
        self, state: str, blob: bytes, dims: int, wanted: int, since: int | None, read_done: int
    ) -> list[str] | None:
        """The `wanted` nearest keys by a numpy scan of the bits this process holds for the
        file (read again when `state`, the recorded value of the file, is not the one they
        were read under); None when numpy 2 is missing or the bits' storage is not a layout
        it reads."""
        if self._signs is False:
            return None
        try:
            from adapters.sqlite import sign_scan
        except ImportError:  # numpy is not installed
            self._signs = False
            return None
        if not sign_scan.available():
            self._signs = False
            return None
        if self._signs is None:
            # rescoring reads each candidate's vector from a 1.5 MB sqlite-vec chunk:
            # through a memory map its overflow pages are not read one system call each
            # (0.08 ms a vector instead of 0.3-0.9 ms at a million vectors)
            self._conn.execute(f"PRAGMA mmap_size = {MMAP_SIZE}")
            self._signs = sign_scan.shared(self._conn)
        dims_bytes = vector_bits.padded_dims(dims) // 8
        matrix = self._signs.matrix(
            state,
            since,
            read_done,
            lambda began: sign_scan.load(self._conn, state, dims_bytes, began),
        )
        if matrix is None:
            self._signs = False
            return None
        query = vector_bits.query_bits(self._conn, blob, dims)
        return sign_scan.keys(self._conn, sign_scan.nearest(matrix, query, wanted))

    # ------------------------------------------------------------------ llm cache

    def get(self, key: str) -> str | None:
        value = self._conn.scalar("SELECT result FROM llm_cache WHERE hash = ?", (key,))
        return None if value is None else str(value)

    def put(self, key: str, value: str) -> None:
        """Best effort: an entry that cannot be written now (another process, e.g. a long
        `qmd update`, holds the write lock past the busy timeout; a full disk) is not cached.
        A search must not fail because its cache could not be filled."""
        try:
            self._conn.execute(
                "INSERT OR REPLACE INTO llm_cache (hash, result, created_at) VALUES (?, ?, ?)",
                (key, value, _now_iso()),
            )
            import random

            if random.random() < 0.01:
                self._conn.execute(
                    "DELETE FROM llm_cache WHERE hash NOT IN (SELECT hash FROM llm_cache "
                    f"ORDER BY created_at DESC LIMIT {LLM_CACHE_KEEP})"
                )
        except OperationalError:
            if self._conn.in_transaction:
                raise  # part of a larger unit of work: its owner decides

    def clear(self) -> None:
        self._conn.execute("DELETE FROM llm_cache")


if TYPE_CHECKING:  # structural conformance, checked by mypy
    from domain.ports import DocumentStore, LexicalIndex, LlmCache, MetadataIndex, VectorIndex

    def _conforms(index: SqliteIndex) -> None:
        _store: DocumentStore = index
        _lex: LexicalIndex = index
        _metadata: MetadataIndex = index
        _vec: VectorIndex = index
        _cache: LlmCache = index
