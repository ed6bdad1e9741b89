"""Embeddings in the index file (the VectorIndex port): sqlite-vec's `vectors_vec` with the
original's KNN rules, and from `PREFILTER_MIN_VECTORS` vectors on a prefilter by the vectors'
sign bits (adapters/sqlite/vector_bits.py, sign_scan.py; REQ-VEC-PREFILTER-*), as
adapters/postgres/vectors.py is on PostgreSQL (pgvector)."""

from __future__ import annotations

import json
import math
import struct
import time
from collections.abc import Sequence
from typing import Any

from adapters.sqlite import vector_bits
from adapters.sqlite.driver import ConnectionPart
from adapters.sqlite.schema import ensure_vec_table, vec_table_dimensions, vec_table_sql
from adapters.storage.sql_rows import META_COLUMNS as _META_COLUMNS
from adapters.storage.sql_rows import ORPHAN_VECTOR_COUNT as _ORPHAN_VECTOR_COUNT
from adapters.storage.sql_rows import meta_from_row as _meta
from adapters.storage.sql_vectors import (
    CONTENT_VECTOR_COLUMNS,
    STORED_VECTOR_MODELS,
    check_query,
    chunk_dimensions,
    content_vector_rows,
    pending_count_sql,
    pending_hashes_sql,
    pending_params,
)
from domain.errors import UNAVAILABLE, QmdError
from domain.model import Document, VectorHit

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


class SqliteVectors(ConnectionPart):
    """VectorIndex on the index file's connection, and the upkeep of its vectors."""

    _prefilter_min_vectors = PREFILTER_MIN_VECTORS
    # The prefilter's bits in memory: this process's copy for the file (sign_scan.SharedSigns),
    # taken by the first search that uses them; False: they cannot be read so. The index drops
    # it on close (the process's copy goes when no open index holds it).
    _signs: Any = None

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

    def has_vector_index(self) -> bool:
        return vec_table_sql(self._conn) is not None

    def vector_dimensions(self) -> int | None:
        return vec_table_dimensions(self._conn)

    def stored_vector_models(self) -> list[str]:
        return [str(r[0]) for r in self._conn.query(STORED_VECTOR_MODELS)]

    def pending_hashes(
        self, model: str, fingerprint: str, *, also: Sequence[tuple[str, str]] = ()
    ) -> list[str]:
        """Active hashes lacking a complete vector set for (model, fingerprint) or a pair of
        `also` (REQ-VEC-MODEL-001), by MIN(path)."""
        sets, params = pending_params(model, fingerprint, also)
        return [str(r[0]) for r in self._conn.query(pending_hashes_sql(sets=sets), params)]

    def pending_count(
        self, model: str, fingerprint: str, *, also: Sequence[tuple[str, str]] = ()
    ) -> int:
        """How many hashes `pending_hashes` would list, without listing them (for status)."""
        sets, params = pending_params(model, fingerprint, also)
        return int(self._conn.scalar(pending_count_sql(sets), params))

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
