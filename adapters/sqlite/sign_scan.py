"""The prefilter's sign bits held in memory and scanned with numpy (REQ-VEC-SIGNSCAN-001).

sqlite-vec 0.1's KNN over `py_vector_bits` costs vectors x k (267 ms for 120 candidates at a
million vectors); a popcount over the same bits in numpy takes a few milliseconds. The bits are
read from `py_vector_bits`'s own storage (sqlite-vec's chunk tables: 1,024 vectors per row, a
validity bitmap, the rowids, the packed bits), about a thousand rows at a million vectors,
so a one-shot `qmd vsearch` pays one bulk read. A long-running server keeps the matrix
and reads it again only when the recorded state of the bits (`vector_bits.state`, which every
write of ours replaces with a fresh random token inside its transaction) is no longer the one
it was read under.

The copy is held once per process per index file (REQ-VEC-SIGNSHARE-001): a server's worker
threads each open a connection of their own, and a copy per connection multiplied both the
memory (48 MB at a million vectors) and the reads after each embed by the number of workers.
Every connection to one file (its device and inode) shares one `SharedSigns`; one search at a
time reads the bits for it, the others wait and take what it read.

numpy is imported by this module only: importing it costs a CLI call that never searches
vectors a noticeable start-up time, so `store.py` imports this module when a search needs it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from adapters.sqlite.driver import Connection
from adapters.sqlite.vector_bits import BITS_TABLE

# The sqlite-vec storage layout read below; another version may lay its chunks out otherwise,
# and then the search keeps to sqlite-vec's own KNN.
LAYOUT_VERSION = ("0", "1")

_CHUNKS = (
    f"SELECT c.size, c.validity, c.rowids, v.vectors FROM {BITS_TABLE}_chunks c "
    f"JOIN {BITS_TABLE}_vector_chunks00 v ON v.rowid = c.chunk_id ORDER BY c.chunk_id"
)


@dataclass(frozen=True)
class SignMatrix:
    """Every vector's sign bits: `words[w, i]` is 64-bit word w of the i-th vector, whose
    `py_vector_bits` rowid is `rowids[i]` (word-major, so each pass reads one contiguous row)."""

    state: str
    words: npt.NDArray[np.uint64]
    rowids: npt.NDArray[np.int64]
    # time.monotonic_ns() no later than the start of the snapshot the bits were read from
    since: int = 0

    @property
    def count(self) -> int:
        return int(self.rowids.shape[0])


class SharedSigns:
    """The bits of one index file as this process holds them, shared by its connections.

    `held` is replaced whole, never changed in place (its arrays are read-only), so a search
    that took it reads a complete matrix while another search reads the next one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one reader of the bits at a time
        self.held: SignMatrix | None = None

    def matrix(
        self,
        state: str,
        since: int | None,
        read_done: int,
        read: Callable[[int], SignMatrix | None],
    ) -> SignMatrix | None:
        """The bits recorded as `state`: the held copy when it is of that state, else what
        `read(since)` reads. `since`..`read_done` bound when the caller's snapshot began
        (`since` None: inside a longer transaction, whose snapshot may be older or hold
        writes not yet committed). What is read replaces the held copy, so the stale one is
        freed once the searches still using it finish, unless the caller's snapshot is
        known to be older than the held copy's; then it serves that one search only."""
        held = self.held
        if held is not None and held.state == state:
            return held
        with self._lock:
            held = self.held
            if held is not None and held.state == state:  # another search just read it
                return held
            fresh = read(0 if since is None else since)
            # the held copy is newer when its snapshot began after ours was taken
            if since is None or (held is not None and held.since > read_done):
                return fresh
            self.held = fresh
            return fresh


_shared: weakref.WeakValueDictionary[tuple[int, int], SharedSigns] = weakref.WeakValueDictionary()
_shared_lock = threading.Lock()
_loads = 0
_loads_lock = threading.Lock()


def shared(conn: Connection) -> SharedSigns:
    """The process's copy of the bits for `conn`'s file, the same for every connection to it;
    kept while a connection holds it. An in-memory database gets one of its own."""
    key = _file_identity(conn)
    if key is None:
        return SharedSigns()
    with _shared_lock:
        found = _shared.get(key)
        if found is None:
            found = SharedSigns()
            _shared[key] = found
        return found


def _file_identity(conn: Connection) -> tuple[int, int] | None:
    """(device, inode) of the file SQLite opened as `main` (its absolute name: a relative
    path would resolve against whatever the working folder is now)."""
    for row in conn.query("PRAGMA database_list"):
        if row[1] == "main":
            if not row[2]:
                return None
            try:
                found = os.stat(row[2])
            except OSError:
                return None
            return found.st_dev, found.st_ino
    return None


def loads() -> int:
    """How many times this process has read bits from an index file (`load`), to count."""
    return _loads


def available() -> bool:
    """numpy 2 counts bits natively; without it the search keeps to sqlite-vec's KNN."""
    return hasattr(np, "bitwise_count")


def load(conn: Connection, state: str, dims_bytes: int, since: int = 0) -> SignMatrix | None:
    """The bits as stored now, or None when their storage is not the layout this reads
    (the caller holds a transaction, so `state` and the bits are of one snapshot)."""
    global _loads
    with _loads_lock:
        _loads += 1
    version = dict(
        conn.query(
            f"SELECT key, value FROM {BITS_TABLE}_info WHERE key IN "
            "('CREATE_VERSION_MAJOR', 'CREATE_VERSION_MINOR')"
        )
    )
    found = (str(version.get("CREATE_VERSION_MAJOR")), str(version.get("CREATE_VERSION_MINOR")))
    if found != LAYOUT_VERSION:
        return None
    words_per_row = _words(dims_bytes)
    capacity = int(conn.scalar(f"SELECT COUNT(*) * MAX(size) FROM {BITS_TABLE}_chunks") or 0)
    words = np.empty((words_per_row, capacity), dtype=np.uint64)
    rowids = np.empty(capacity, dtype=np.int64)
    filled = 0
    # one chunk at a time into one preallocated array: joining and masking the whole set at
    # once touched three times the memory and took several times longer
    for size, valid, ids, vectors in conn.raw.execute(_CHUNKS):
        size = int(size)
        if len(ids) != 8 * size or len(vectors) != dims_bytes * size or len(valid) * 8 < size:
            return None
        if filled + size > capacity:  # the caller reads in one transaction: never so
            return None
        packed = np.frombuffer(vectors, dtype=np.uint8).reshape(size, dims_bytes)
        chunk_rowids = np.frombuffer(ids, dtype="<i8")
        if valid.count(b"\xff") * 8 < size:  # some slots empty (deleted, or not yet used)
            keep = np.unpackbits(np.frombuffer(valid, dtype=np.uint8), bitorder="little")
            mask = keep[:size].astype(bool)
            packed, chunk_rowids = packed[mask], chunk_rowids[mask]
        n = int(chunk_rowids.shape[0])
        words[:, filled : filled + n] = _word_major(packed)
        rowids[filled : filled + n] = chunk_rowids
        filled += n
    return _frozen(SignMatrix(state, words[:, :filled], rowids[:filled], since))


def _frozen(matrix: SignMatrix) -> SignMatrix:
    """Shared between threads: nothing may write into it."""
    matrix.words.flags.writeable = False
    matrix.rowids.flags.writeable = False
    return matrix


def from_rows(state: str, rows: Sequence[bytes], rowids: Sequence[int]) -> SignMatrix:
    """A matrix of packed bit rows of equal length (what `load` builds from the file)."""
    dims_bytes = len(rows[0]) if rows else 1
    packed = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), dims_bytes)
    return _frozen(
        SignMatrix(
            state, np.ascontiguousarray(_word_major(packed)), np.array(rowids, dtype=np.int64)
        )
    )


def _words(dims_bytes: int) -> int:
    return -(-dims_bytes // 8)


def _word_major(packed: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """(rows, bytes) packed bits as (64-bit words, rows); zero bytes pad the last word (zero
    bits match zero bits, so distances do not change)."""
    width = 8 * _words(int(packed.shape[1]))
    if width != packed.shape[1]:
        packed = np.pad(packed, ((0, 0), (0, width - int(packed.shape[1]))))
    return np.ascontiguousarray(packed).view("<u8").T


def nearest(matrix: SignMatrix, query_bits: bytes, n: int) -> list[int]:
    """The rowids of the `n` vectors nearest to `query_bits` in Hamming distance; among equal
    distances the earlier stored vector comes first."""
    if matrix.count == 0 or n <= 0:
        return []
    padded = query_bits + b"\0" * (8 * matrix.words.shape[0] - len(query_bits))
    query = np.frombuffer(padded, dtype="<u8")
    distance = np.zeros(matrix.count, dtype=np.uint16)
    for word in range(matrix.words.shape[0]):
        distance += np.bitwise_count(np.bitwise_xor(matrix.words[word], query[word]))
    if n >= matrix.count:
        order = np.argsort(distance, kind="stable")
        return [int(r) for r in matrix.rowids[order]]
    # the distance at which the n-th nearest lies: everything below it, then ties in order
    histogram = np.bincount(distance, minlength=int(distance.max()) + 1)
    threshold = int(np.searchsorted(np.cumsum(histogram), n))
    below = np.flatnonzero(distance < threshold)
    ties = np.flatnonzero(distance == threshold)[: n - below.shape[0]]
    picked = np.concatenate([below, ties])
    picked = picked[np.argsort(distance[picked], kind="stable")]
    return [int(r) for r in matrix.rowids[picked]]


def keys(conn: Connection, rowids: Sequence[int]) -> list[str]:
    """The chunk keys (hash_seq) of these `py_vector_bits` rowids, in the same order."""
    found: dict[int, str] = {}
    for start in range(0, len(rowids), 500):
        part = list(rowids[start : start + 500])
        rows: list[tuple[Any, ...]] = conn.query(
            f"SELECT rowid, id FROM {BITS_TABLE}_rowids "
            f"WHERE rowid IN ({','.join('?' * len(part))})",
            part,
        )
        found.update((int(r[0]), str(r[1])) for r in rows)
    return [found[r] for r in rowids if r in found]
