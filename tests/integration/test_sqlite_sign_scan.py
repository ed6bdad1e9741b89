"""SQLite's prefilter bits held in memory (REQ-VEC-SIGNSCAN-001): the numpy scan picks what a
plain Hamming ranking picks, the fast path answers what the exact scan answers when its
candidates hold everything, and every write, delete and rollback is seen by the next search.
The copy is one per process per file, shared by its connections (REQ-VEC-SIGNSHARE-001)."""

from __future__ import annotations

import gc
import hashlib
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.sqlite import sign_scan, vector_bits
from adapters.sqlite.driver import connect
from adapters.sqlite.store import SqliteIndex

T0 = "2025-01-01T00:00:00.000Z"
REPO = Path(__file__).resolve().parents[2]


def _add(index: SqliteIndex, path: str, vectors: list[list[float]]) -> str:
    digest = hashlib.sha256(path.encode("utf-8")).hexdigest()
    index.upsert_document("c", path, path, digest, path, T0, T0)
    index.store_chunk_vectors(
        digest, [(seq, seq * 10, v) for seq, v in enumerate(vectors)], "m", "f", T0
    )
    return digest


def _paths(index: SqliteIndex, query: list[float], limit: int) -> list[tuple[str, float]]:
    return [(h.document.meta.path, h.distance) for h in index.search_vectors(query, limit, None)]


def _fast(path: Path) -> SqliteIndex:
    return SqliteIndex(connect(path), prefilter_min_vectors=0)


def _held(index: SqliteIndex) -> sign_scan.SignMatrix:
    """The bits the process holds in memory for the index's file: the fast path did run."""
    assert isinstance(index._signs, sign_scan.SharedSigns)
    held = index._signs.held
    assert isinstance(held, sign_scan.SignMatrix)
    return held


# ------------------------------------------------------------------ the scan itself


@settings(max_examples=200, deadline=None)
@given(
    width=st.integers(min_value=1, max_value=20),
    data=st.data(),
)
def test_scan_picks_the_hamming_nearest_in_stored_order(width: int, data: st.DataObject) -> None:
    rows = data.draw(st.lists(st.binary(min_size=width, max_size=width), min_size=1, max_size=150))
    query = data.draw(st.binary(min_size=width, max_size=width))
    wanted = data.draw(st.integers(min_value=1, max_value=len(rows) + 5))
    rowids = [1000 + 7 * i for i in range(len(rows))]
    matrix = sign_scan.from_rows("s", rows, rowids)

    def distance(row: bytes) -> int:
        return sum(bin(a ^ b).count("1") for a, b in zip(row, query, strict=True))

    reference = sorted(range(len(rows)), key=lambda i: (distance(rows[i]), i))[:wanted]
    assert sign_scan.nearest(matrix, query, wanted) == [rowids[i] for i in reference]


# ------------------------------------------------------------------ fast path = exact scan


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    dims=st.integers(min_value=2, max_value=70),
    docs=st.integers(min_value=1, max_value=20),
    seed=st.integers(min_value=0, max_value=2**31),
    limit=st.integers(min_value=1, max_value=12),
)
def test_fast_path_returns_the_exact_scans_top_k(
    dims: int, docs: int, seed: int, limit: int
) -> None:
    """At most 60 chunks: fewer than the 64 candidates, so every chunk is rescored and the
    answer must be the exact scan's, documents, chunks, distances and order."""
    rng = random.Random(seed)
    corpus = [
        [[rng.gauss(0, 1) for _ in range(dims)] for _ in range(rng.randint(1, 3))]
        for _ in range(docs)
    ]
    query = [rng.gauss(0, 1) for _ in range(dims)]
    with tempfile.TemporaryDirectory() as folder:
        exact = SqliteIndex(connect(Path(folder) / "exact.sqlite"), prefilter_min_vectors=10**9)
        fast = _fast(Path(folder) / "fast.sqlite")
        try:
            for i, vectors in enumerate(corpus):
                _add(exact, f"d{i:02d}.md", vectors)
                _add(fast, f"d{i:02d}.md", vectors)
            got = [
                (h.document.meta.path, h.chunk_pos, h.distance)
                for h in fast.search_vectors(query, limit, None)
            ]
            want = [
                (h.document.meta.path, h.chunk_pos, h.distance)
                for h in exact.search_vectors(query, limit, None)
            ]
            assert _held(fast).count == sum(len(v) for v in corpus)
            assert got == want
        finally:
            exact.close()
            fast.close()


# ------------------------------------------------------------------ the copy in memory


def _decoys(index: SqliteIndex) -> None:
    """100 documents one sign bit away from the all-positive query, at cosine distance 0.06:
    they fill the 64 candidates whenever a vector's bits say it is further than they are."""
    with index.transaction():
        for i in range(100):
            _add(index, f"decoy{i:03d}.md", [[1.0] * 7 + [-0.001 * (i + 1)]])


QUERY = [1.0] * 8


def test_a_vector_stored_after_a_search_is_found(tmp_path: Path) -> None:
    index = _fast(tmp_path / "index.sqlite")
    try:
        _decoys(index)
        assert _paths(index, QUERY, 1)[0][0].startswith("decoy")
        before = _held(index)
        _add(index, "new.md", [QUERY])
        assert _paths(index, QUERY, 1) == [("new.md", pytest.approx(0.0, abs=1e-6))]
        assert _held(index) is not before
        assert _held(index).count == 101
    finally:
        index.close()


def test_replaced_and_deleted_vectors_are_seen(tmp_path: Path) -> None:
    index = _fast(tmp_path / "index.sqlite")
    try:
        _decoys(index)
        digest = _add(index, "moving.md", [[-1.0] * 8])
        assert "moving.md" not in {p for p, _ in _paths(index, QUERY, 3)}
        # re-embedded next to the query: its new bits must be searched, not the old ones
        index.store_chunk_vectors(digest, [(0, 0, QUERY)], "m", "f", T0)
        assert _paths(index, QUERY, 1) == [("moving.md", pytest.approx(0.0, abs=1e-6))]
        index.deactivate_documents("c", ["moving.md"])
        assert index.cleanup()["orphaned_vectors"] == 1
        assert _paths(index, QUERY, 1)[0][0].startswith("decoy")
        assert _held(index).count == 100
        assert vector_bits.in_step(index.connection) == 100
    finally:
        index.close()


def test_a_rollback_is_seen_by_the_next_search(tmp_path: Path) -> None:
    """A search inside a transaction reads its uncommitted vector; after the rollback the
    same rowid and the same count come back with another vector (sqlite-vec's rowid sequence
    rolls back too): only the recorded token tells the two states apart."""
    index = _fast(tmp_path / "index.sqlite")
    try:
        _decoys(index)
        with pytest.raises(RuntimeError), index.transaction():
            _add(index, "x.md", [[-1.0] * 8])
            assert "x.md" not in {p for p, _ in _paths(index, QUERY, 3)}
            raise RuntimeError("roll back")
        _add(index, "x.md", [QUERY])
        assert _paths(index, QUERY, 1) == [("x.md", pytest.approx(0.0, abs=1e-6))]
    finally:
        index.close()


def test_an_outer_rollback_leaves_the_recorded_count_true(tmp_path: Path) -> None:
    """The count our writes record comes from the file inside their transaction: a store
    rolled back with its outer transaction leaves no count behind for the next store."""
    index = _fast(tmp_path / "index.sqlite")
    try:
        _add(index, "a.md", [[1.0, 0.0], [0.0, 1.0]])
        _add(index, "b.md", [[0.5, 0.5]])
        with pytest.raises(RuntimeError), index.transaction():
            _add(index, "c.md", [[0.3, 0.7]])
            raise RuntimeError("roll back")
        _add(index, "d.md", [[0.7, 0.3]])
        assert vector_bits.in_step(index.connection) == 4
        assert {p for p, _ in _paths(index, [1.0, 0.0], 10)} == {"a.md", "b.md", "d.md"}
    finally:
        index.close()


def test_another_connections_write_is_seen(tmp_path: Path) -> None:
    """A server's copy of the bits and a `qmd embed` in another process: the embed's commit
    records a new token, so the server reads the bits again."""
    path = tmp_path / "index.sqlite"
    server = _fast(path)
    writer = _fast(path)
    try:
        _decoys(writer)
        assert _paths(server, QUERY, 1)[0][0].startswith("decoy")
        _add(writer, "new.md", [QUERY])
        assert _paths(server, QUERY, 1) == [("new.md", pytest.approx(0.0, abs=1e-6))]
    finally:
        server.close()
        writer.close()


def test_writes_that_leave_the_vectors_alone_keep_the_bits_in_memory(tmp_path: Path) -> None:
    """Only a change to the vectors reads the bits again: documents, configuration and
    document deactivation written here or by another connection (a `qmd update` of an
    unchanged folder, a memory or config write beside a server) keep the copy in memory,
    the same object; a vector write, here or from another connection, replaces it and the
    next search finds the new vector."""
    path = tmp_path / "index.sqlite"
    server = _fast(path)
    writer = _fast(path)
    try:
        _decoys(server)
        _add(server, "spare.md", [[-1.0] * 8])
        assert _paths(server, QUERY, 1)[0][0].startswith("decoy")
        held = _held(server)
        digest = hashlib.sha256(b"plain").hexdigest()
        server.upsert_document("c", "plain.md", "plain", digest, "plain text", T0, T0)
        server.set_config_value("some-key", "a value")
        writer.upsert_document("c", "other.md", "other", digest, "plain text", T0, T0)
        writer.set_config_value("some-key", "another value")
        writer.deactivate_documents("c", ["plain.md"])
        assert server.cleanup()["orphaned_vectors"] == 0
        assert _paths(server, QUERY, 1)[0][0].startswith("decoy")
        assert _held(server) is held
        _add(server, "mine.md", [QUERY])  # a vector write on the server's own connection
        assert _paths(server, QUERY, 1) == [("mine.md", pytest.approx(0.0, abs=1e-6))]
        assert _held(server) is not held
        held = _held(server)
        server.deactivate_documents("c", ["mine.md"])
        _add(writer, "theirs.md", [QUERY])  # and on another connection
        assert _paths(server, QUERY, 1) == [("theirs.md", pytest.approx(0.0, abs=1e-6))]
        assert _held(server) is not held
        assert _held(server).count == 103
    finally:
        server.close()
        writer.close()


# ------------------------------------------------------------------ one copy per process


def _one_copy(*indexes: SqliteIndex) -> sign_scan.SignMatrix:
    """The matrix every one of `indexes` uses: the same object."""
    held = _held(indexes[0])
    for other in indexes[1:]:
        assert _held(other) is held
    return held


def test_connections_to_one_file_share_one_copy_read_once(tmp_path: Path) -> None:
    """A server's worker threads each open their own connection: the bits are read once
    and held once for all of them (REQ-VEC-SIGNSHARE-001), whatever name the file was
    opened by (here a symbolic link to it)."""
    path = tmp_path / "index.sqlite"
    first, second = _fast(path), _fast(path)
    (tmp_path / "link.sqlite").symlink_to(path)
    third = _fast(tmp_path / "link.sqlite")
    try:
        _decoys(first)
        before = sign_scan.loads()
        assert _paths(first, QUERY, 1)[0][0].startswith("decoy")
        assert _paths(second, QUERY, 1)[0][0].startswith("decoy")
        assert _paths(second, QUERY, 1)[0][0].startswith("decoy")
        assert _paths(third, QUERY, 1)[0][0].startswith("decoy")
        assert sign_scan.loads() - before == 1
        assert _one_copy(first, second, third).count == 100
    finally:
        first.close()
        second.close()
        third.close()


_WRITE_ELSEWHERE = """
import hashlib, sys
from adapters.sqlite.driver import connect
from adapters.sqlite.store import SqliteIndex
index = SqliteIndex(connect(sys.argv[1]), prefilter_min_vectors=0)
digest = hashlib.sha256(b"new.md").hexdigest()
index.upsert_document("c", "new.md", "new.md", digest, "new.md", sys.argv[2], sys.argv[2])
index.store_chunk_vectors(digest, [(0, 0, [1.0] * 8)], "m", "f", sys.argv[2])
index.close()
"""


@pytest.mark.parametrize("writer", ["first", "second", "another connection", "another process"])
def test_a_vector_write_is_seen_by_every_connection_after_one_read(
    tmp_path: Path, writer: str
) -> None:
    """After a vector write, here or in another process (a `qmd embed` beside a server), the
    next search on each connection finds the new vector; the bits are read again once for
    the process, and the stale copy is not kept."""
    path = tmp_path / "index.sqlite"
    first, second = _fast(path), _fast(path)
    other = _fast(path)
    try:
        _decoys(first)
        assert _paths(first, QUERY, 1)[0][0].startswith("decoy")
        assert _paths(second, QUERY, 1)[0][0].startswith("decoy")
        stale = weakref.ref(_one_copy(first, second))
        if writer == "another process":
            subprocess.run(
                [sys.executable, "-c", _WRITE_ELSEWHERE, str(path), T0],
                check=True,
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                timeout=120,
            )
        else:
            _add({"first": first, "second": second}.get(writer, other), "new.md", [QUERY])
        before = sign_scan.loads()
        for index in (first, second, first, second):
            assert _paths(index, QUERY, 1) == [("new.md", pytest.approx(0.0, abs=1e-6))]
        assert sign_scan.loads() - before == 1
        assert _one_copy(first, second).count == 101
        gc.collect()
        assert stale() is None  # no connection keeps the copy from before the write
    finally:
        first.close()
        second.close()
        other.close()


def _slow_bulk_read(statement: str) -> None:
    if "_vector_chunks00" in statement:
        time.sleep(0.3)


def test_concurrent_first_searches_read_the_bits_once(tmp_path: Path) -> None:
    """Worker threads searching at the same moment on their own connections: one reads the
    bits, the others wait for it and use the same matrix; every answer is the same."""
    path = tmp_path / "index.sqlite"
    with _fast(path) as writer:
        _decoys(writer)
    workers = [_fast(path) for _ in range(6)]
    for index in workers:
        # the bulk read of the bits made slow, as at a million vectors: every search
        # reaches the copy while the first read of it is still under way
        index.connection.raw.set_trace_callback(_slow_bulk_read)
    start = threading.Barrier(len(workers))
    answers: list[list[tuple[str, float]]] = []
    failures: list[BaseException] = []

    def search(index: SqliteIndex) -> None:
        try:
            start.wait(timeout=30)
            answers.append(_paths(index, QUERY, 5))
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    try:
        before = sign_scan.loads()
        threads = [threading.Thread(target=search, args=(w,)) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not failures
        assert sign_scan.loads() - before == 1
        assert len(answers) == len(workers)
        assert all(answer == answers[0] for answer in answers)
        assert _one_copy(*workers).count == 100
    finally:
        for index in workers:
            index.close()


def test_a_search_inside_an_uncommitted_write_leaves_the_shared_copy(tmp_path: Path) -> None:
    """A search inside a write transaction sees its own uncommitted vector from bits read
    for it alone: the copy the other connections use stays, and after the rollback neither
    connection reads the bits again."""
    path = tmp_path / "index.sqlite"
    first, second = _fast(path), _fast(path)
    try:
        _decoys(first)
        assert _paths(second, QUERY, 1)[0][0].startswith("decoy")
        shared = _one_copy(second)
        with pytest.raises(RuntimeError), first.transaction():
            _add(first, "x.md", [QUERY])
            assert _paths(first, QUERY, 1) == [("x.md", pytest.approx(0.0, abs=1e-6))]
            assert _held(second) is shared
            raise RuntimeError("roll back")
        before = sign_scan.loads()
        assert _paths(first, QUERY, 1)[0][0].startswith("decoy")
        assert _paths(second, QUERY, 1)[0][0].startswith("decoy")
        assert sign_scan.loads() == before
        assert _one_copy(first, second) is shared
    finally:
        first.close()
        second.close()


def test_closing_every_connection_frees_the_copy(tmp_path: Path) -> None:
    """The process keeps a file's bits only while an open index holds them: a process that
    opens many index files in turn does not accumulate their matrices."""
    path = tmp_path / "index.sqlite"
    first, second = _fast(path), _fast(path)
    _decoys(first)
    assert _paths(first, QUERY, 1)[0][0].startswith("decoy")
    assert _paths(second, QUERY, 1)[0][0].startswith("decoy")
    held = weakref.ref(_one_copy(first, second))
    first.close()
    gc.collect()
    assert held() is not None  # the second connection still uses it
    second.close()
    gc.collect()
    assert held() is None


def _matrix(state: str, since: int) -> sign_scan.SignMatrix:
    return sign_scan.SignMatrix(state, np.zeros((1, 0), np.uint64), np.zeros(0, np.int64), since)


def test_bits_read_for_an_older_snapshot_do_not_replace_newer_ones() -> None:
    """A search whose snapshot was taken (state read by 5) before the held copy's snapshot
    began (at 10) reads an older state: its bits serve it once and the newer copy stays.
    A snapshot not known to be older replaces the held copy."""
    shared = sign_scan.SharedSigns()
    newer = shared.matrix("s2", 10, 12, lambda since: _matrix("s2", since))
    assert newer is not None and newer.since == 10
    older = shared.matrix("s1", 1, 5, lambda since: _matrix("s1", since))
    assert older is not None and older.state == "s1"
    assert shared.held is newer
    overlapping = shared.matrix("s3", 8, 11, lambda since: _matrix("s3", since))
    assert shared.held is overlapping


def test_a_read_that_fails_leaves_the_copy_and_the_next_read_goes_ahead() -> None:
    """A read stopped halfway (an interrupted search, a locked file) installs nothing and
    holds no lock: the copy before it stays, and the next search reads the bits."""
    shared = sign_scan.SharedSigns()
    first = shared.matrix("s1", 1, 2, lambda since: _matrix("s1", since))

    def broken(since: int) -> sign_scan.SignMatrix:
        raise OSError("interrupted")

    with pytest.raises(OSError):
        shared.matrix("s2", 3, 4, broken)
    assert shared.held is first
    assert shared.matrix("s2", 5, 6, lambda since: _matrix("s2", since)) is shared.held
    assert shared.held is not None and shared.held.state == "s2"
