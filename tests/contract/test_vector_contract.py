"""VectorIndex contract: InMemoryStore and SqliteIndex store, find and report vectors alike."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.sqlite import vector_bits
from adapters.sqlite.driver import connect
from adapters.sqlite.store import SqliteIndex
from adapters.sqlite.vector_bits import BITS_TABLE
from adapters.sqlite.vectors import SQLITE_VEC_MAX_K
from domain.errors import INVALID_ARGUMENT, QmdError
from tests.backend_locations import BACKENDS
from tests.contract.conftest import StoreLike, open_store

T0 = "2025-01-01T00:00:00.000Z"


@pytest.fixture(params=[*BACKENDS, "sqlite-prefilter"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreLike]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def add(store: StoreLike, collection: str, path: str, body: str) -> str:
    store.upsert_document(collection, path, path, sha(body), body, T0, T0)
    return sha(body)


def test_pending_hashes_until_complete(store: StoreLike) -> None:
    a = add(store, "c", "b-second.md", "alpha")
    b = add(store, "c", "a-first.md", "beta")
    add(store, "d", "z.md", "alpha")  # same content as a: one hash
    assert store.pending_hashes("m", "fp") == [b, a]  # ordered by first path
    assert store.pending_count("m", "fp") == 2
    assert not store.has_vector_index()
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0, 0.0]), (1, 50, [0.0, 1.0, 0.0])], "m", "fp", T0)
    assert store.has_vector_index()
    assert store.pending_hashes("m", "fp") == [b]
    assert store.pending_count("m", "fp") == 1
    # another model or fingerprint still needs everything
    assert store.pending_hashes("m", "other") == [b, a]
    assert store.pending_hashes("m2", "fp") == [b, a]
    # inactive documents need nothing
    store.deactivate_documents("c", ["a-first.md"])
    assert store.pending_hashes("m", "fp") == []
    assert store.pending_count("m", "fp") == 0


def test_store_replaces_previous_vectors(store: StoreLike) -> None:
    a = add(store, "c", "a.md", "alpha")
    store.store_chunk_vectors(
        a, [(0, 0, [1.0, 0.0]), (1, 10, [0.0, 1.0]), (2, 20, [0.7, 0.7])], "m", "fp", T0
    )
    store.store_chunk_vectors(a, [(0, 0, [0.0, 1.0])], "m", "fp", T0)
    hits = store.search_vectors([1.0, 0.0], 5, None)
    assert len(hits) == 1
    assert hits[0].distance == pytest.approx(1.0, abs=1e-6)
    assert hits[0].chunk_pos == 0


def test_search_dedups_by_document_and_orders_by_distance(store: StoreLike) -> None:
    a = add(store, "c", "a.md", "alpha")
    b = add(store, "c", "b.md", "beta")
    g = add(store, "other", "g.md", "gamma")
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0, 0.0]), (1, 40, [0.9, 0.1, 0.0])], "m", "f", T0)
    store.store_chunk_vectors(b, [(0, 0, [0.0, 1.0, 0.0]), (1, 7, [0.6, 0.8, 0.0])], "m", "f", T0)
    store.store_chunk_vectors(g, [(0, 3, [0.0, 0.0, 1.0])], "m", "f", T0)
    hits = store.search_vectors([1.0, 0.0, 0.0], 10, None)
    assert [h.document.meta.display_path for h in hits] == ["c/a.md", "c/b.md", "other/g.md"]
    assert hits[0].distance == pytest.approx(0.0, abs=1e-6)
    assert hits[0].chunk_pos == 0
    assert hits[1].distance == pytest.approx(0.4, abs=1e-5)
    assert hits[1].chunk_pos == 7
    assert hits[1].document.body == "beta"
    assert hits[2].distance == pytest.approx(1.0, abs=1e-6)
    # query closest to the second chunk of a.md picks that chunk's position
    best = store.search_vectors([0.9, 0.1, 0.0], 1, None)
    assert [(h.document.meta.path, h.chunk_pos) for h in best] == [("a.md", 40)]
    scoped = store.search_vectors([0.1, 0.2, 1.0], 10, "c")
    assert [h.document.meta.path for h in scoped] == ["b.md", "a.md"]
    assert store.search_vectors([0.0, 0.0, 1.0], 10, "nope") == []
    assert store.search_vectors([0.0, 0.0, 1.0], 0, None) == []


def test_shared_content_is_found_in_each_collection(store: StoreLike) -> None:
    h = add(store, "one", "x.md", "same")
    add(store, "two", "y.md", "same")
    store.store_chunk_vectors(h, [(0, 0, [1.0, 0.0])], "m", "f", T0)
    found = {hit.document.meta.display_path for hit in store.search_vectors([1.0, 0.0], 5, None)}
    assert found == {"one/x.md", "two/y.md"}
    assert [x.document.meta.path for x in store.search_vectors([1.0, 0.0], 5, "two")] == ["y.md"]
    store.deactivate_documents("one", ["x.md"])
    found = {hit.document.meta.display_path for hit in store.search_vectors([1.0, 0.0], 5, None)}
    assert found == {"two/y.md"}


def test_dimension_mismatch(store: StoreLike) -> None:
    a = add(store, "c", "a.md", "alpha")
    b = add(store, "c", "b.md", "beta")
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0, 0.0])], "m", "f", T0)
    with pytest.raises(QmdError) as info:
        store.store_chunk_vectors(b, [(0, 0, [1.0, 0.0])], "m", "f", T0)
    assert info.value.code == INVALID_ARGUMENT
    assert info.value.message == (
        "Embedding dimension mismatch: existing vectors are 3d but the current model produces 2d. "
        "Run 'qmd embed -f' to re-embed with the new model."
    )
    assert store.pending_hashes("m", "f") == [b]
    with pytest.raises(QmdError):
        store.search_vectors([1.0, 0.0], 3, None)


def test_clear_vectors_allows_a_new_dimension(store: StoreLike) -> None:
    a = add(store, "c", "a.md", "alpha")
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0, 0.0])], "m", "f", T0)
    store.clear_vectors()
    assert not store.has_vector_index()
    assert store.search_vectors([1.0, 0.0], 3, None) == []
    assert store.pending_hashes("m", "f") == [a]
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0])], "m2", "f2", T0)
    assert [h.document.meta.path for h in store.search_vectors([1.0, 0.0], 3, None)] == ["a.md"]
    assert store.pending_hashes("m2", "f2") == []


def _crowded(store: StoreLike) -> None:
    """30 `big` documents right next to the query direction, 3 `small` ones far from it."""
    for i in range(30):
        h = add(store, "big", f"b{i:02d}.md", f"big {i}")
        store.store_chunk_vectors(h, [(0, 0, [1.0, 0.01 * i, 0.0])], "m", "f", T0)
    for i in range(3):
        h = add(store, "small", f"s{i}.md", f"small {i}")
        store.store_chunk_vectors(
            h, [(0, 0, [0.1, 0.0, 1.0 - 0.1 * i]), (1, 9, [0.0, 1.0, 0.0])], "m", "f", T0
        )


def test_a_small_collection_is_not_starved_by_a_crowded_one(store: StoreLike) -> None:
    _crowded(store)
    query = [1.0, 0.0, 0.0]
    assert all(h.document.meta.collection == "big" for h in store.search_vectors(query, 5, None))
    scoped = store.search_vectors(query, 2, "small")
    # the small collection's own two nearest documents, though 30 others are nearer
    assert [h.document.meta.path for h in scoped] == ["s2.md", "s1.md"]
    assert [h.chunk_pos for h in scoped] == [0, 0]
    everything = store.search_vectors(query, 10, "small")
    assert [h.document.meta.path for h in everything] == ["s2.md", "s1.md", "s0.md"]


def test_collection_search_past_the_knn_cap(tmp_path: Path) -> None:
    # sqlite-vec answers at most SQLITE_VEC_MAX_K neighbours; when that many vectors of other
    # collections are all nearer, the adapter scores the collection's own chunks directly.
    index = SqliteIndex.open(tmp_path / "index.sqlite")
    try:
        with index.transaction():
            for i in range(SQLITE_VEC_MAX_K + 4):
                h = add(index, "big", f"b{i}.md", f"big {i}")
                index.store_chunk_vectors(h, [(0, 0, [1.0, 0.0001 * i, 0.0])], "m", "f", T0)
        _crowded(index)
        scoped = index.search_vectors([1.0, 0.0, 0.0], 2, "small")
        assert [h.document.meta.path for h in scoped] == ["s2.md", "s1.md"]
    finally:
        index.close()


# ------------------------------------------------------------- SQLite's binary prefilter


def _structured(n: int, dims: int, seed: int) -> list[list[float]]:
    """Unit vectors shaped like sentence embeddings (benchmarks/bench_scale.py's process, in
    small): points of a 16-dimension latent space around 50 centres, placed in `dims` by a
    fixed random map, with a shared offset (real embeddings are not centred) and some noise."""
    shape = random.Random(1)
    latent_dims = 16
    basis = [[shape.gauss(0, 1) for _ in range(latent_dims)] for _ in range(dims)]
    centres = [[shape.gauss(0, 1) for _ in range(latent_dims)] for _ in range(50)]
    offset = [shape.gauss(0, 0.4) for _ in range(dims)]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        centre = centres[rng.randrange(len(centres))]
        point = [c + rng.gauss(0, 0.5) for c in centre]
        v = [
            sum(b * p for b, p in zip(row, point, strict=True)) + o + rng.gauss(0, 0.2)
            for row, o in zip(basis, offset, strict=True)
        ]
        norm = sum(x * x for x in v) ** 0.5
        out.append([x / norm for x in v])
    return out


def _load(index: SqliteIndex, vectors: list[list[float]]) -> None:
    with index.transaction():
        for i, v in enumerate(vectors):
            h = add(index, "c", f"d{i:05d}.md", f"doc {i}")
            index.store_chunk_vectors(h, [(0, 0, v)], "m", "f", T0)


@pytest.mark.slow  # 20,000 vectors, exact and prefiltered: left out of `make test-fast`
def test_prefilter_recall_against_exact_search(tmp_path: Path) -> None:
    """REQ-VEC-PREFILTER-001: with the prefilter forced on, the ten nearest documents are
    those of an exact scan at least 95% of the time, and every distance is the exact one."""
    vectors = _structured(4000, 128, seed=7)
    queries = _structured(30, 128, seed=8)
    exact = SqliteIndex(connect(tmp_path / "exact.sqlite"), prefilter_min_vectors=10**9)
    fast = SqliteIndex(connect(tmp_path / "fast.sqlite"), prefilter_min_vectors=0)
    try:
        _load(exact, vectors)
        _load(fast, vectors)
        assert fast.connection.scalar(f"SELECT COUNT(*) FROM {BITS_TABLE}") == len(vectors)
        # the candidate set is far smaller than the corpus: the prefilter does choose
        assert len(vectors) > 256 * 3
        found = 0
        for q in queries:
            truth = {h.document.meta.path: h.distance for h in exact.search_vectors(q, 10, None)}
            got = fast.search_vectors(q, 10, None)
            assert len(got) == 10
            for hit in got:
                if hit.document.meta.path in truth:
                    found += 1
                    assert hit.distance == truth[hit.document.meta.path]
        assert found / (10 * len(queries)) >= 0.95
    finally:
        exact.close()
        fast.close()


def test_prefilter_answers_exactly_when_candidates_hold_the_top_k(tmp_path: Path) -> None:
    """REQ-VEC-PREFILTER-001: the nearest by the sign bits are rescored with the full vectors,
    so the order and distances are the exact scan's, not the Hamming order."""
    exact = SqliteIndex(connect(tmp_path / "exact.sqlite"), prefilter_min_vectors=10**9)
    fast = SqliteIndex(connect(tmp_path / "fast.sqlite"), prefilter_min_vectors=0)
    try:
        # all these share the query's sign bits: Hamming cannot order them, cosine must
        vectors = [[1.0, 0.05 * i, 0.5, 0.2] for i in range(1, 40)]
        _load(exact, vectors)
        _load(fast, vectors)
        q = [1.0, 0.3, 0.5, 0.2]
        want = [(h.document.meta.path, h.distance) for h in exact.search_vectors(q, 10, None)]
        got = [(h.document.meta.path, h.distance) for h in fast.search_vectors(q, 10, None)]
        assert got == want
        assert got[0][0] == "d00005.md"
    finally:
        exact.close()
        fast.close()


def test_vectors_written_by_another_program_are_found(tmp_path: Path) -> None:
    """REQ-VEC-PREFILTER-003: vectors the original QMD wrote (no bits of ours) are searched
    exactly, and our next vector write quantizes them."""
    path = tmp_path / "index.sqlite"
    index = SqliteIndex(connect(path), prefilter_min_vectors=0)
    try:
        _load(index, [[1.0, 0.0, 0.0, 0.0]] * 3)
        near = add(index, "c", "near.md", "near")
        # what the original does: rows in content_vectors and vectors_vec only
        conn = index.connection
        conn.execute(
            "INSERT INTO content_vectors (hash, seq, pos, model, embed_fingerprint, "
            "total_chunks, embedded_at) VALUES (?, 0, 0, 'm', 'f', 1, ?)",
            (near, T0),
        )
        conn.execute(
            "INSERT INTO vectors_vec (hash_seq, embedding) VALUES (?, vec_f32(?))",
            (f"{near}_0", "[0.0, 0.0, 1.0, 0.0]"),
        )
    finally:
        index.close()
    reopened = SqliteIndex(connect(path), prefilter_min_vectors=0)
    try:
        hits = reopened.search_vectors([0.0, 0.0, 1.0, 0.0], 1, None)
        assert [h.document.meta.path for h in hits] == ["near.md"]
        later = add(reopened, "c", "later.md", "later")
        reopened.store_chunk_vectors(later, [(0, 0, [0.0, 1.0, 0.0, 0.0])], "m", "f", T0)
        count = reopened.connection.scalar(f"SELECT COUNT(*) FROM {BITS_TABLE}")
        assert count == 5
        hits = reopened.search_vectors([0.0, 0.0, 1.0, 0.0], 1, None)
        assert [h.document.meta.path for h in hits] == ["near.md"]
    finally:
        reopened.close()


def test_small_indexes_are_searched_exactly(tmp_path: Path) -> None:
    """REQ-VEC-PREFILTER-002: 100 decoys share every sign bit with the query while the true
    nearest vector differs in seven; the prefilter (forced on) misses it, the default, below
    20,000 vectors, is the exact scan and finds it."""
    eps = 0.001
    decoys = [[0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0 + 0.01 * i] for i in range(100)]
    nearest = [1.0, -eps, -eps, -eps, -eps, -eps, -eps, -eps]
    query = [1.0, eps, eps, eps, eps, eps, eps, eps]
    default = SqliteIndex(connect(tmp_path / "default.sqlite"))
    forced = SqliteIndex(connect(tmp_path / "forced.sqlite"), prefilter_min_vectors=0)
    try:
        for index in (default, forced):
            _load(index, [*decoys, nearest])
        assert [h.document.meta.path for h in default.search_vectors(query, 1, None)] == [
            "d00100.md"
        ]
        assert [h.document.meta.path for h in forced.search_vectors(query, 1, None)] != [
            "d00100.md"
        ]
    finally:
        default.close()
        forced.close()


def test_our_writes_keep_the_bits_in_step(tmp_path: Path) -> None:
    """REQ-VEC-PREFILTER-003: replacing, adding and cleaning up vectors keeps the bits and the
    recorded signature equal to what a fresh count of `vectors_vec` gives."""
    index = SqliteIndex(connect(tmp_path / "index.sqlite"), prefilter_min_vectors=0)
    try:
        a = add(index, "c", "a.md", "alpha")
        b = add(index, "c", "b.md", "beta")
        index.store_chunk_vectors(a, [(0, 0, [1.0, 0.0]), (1, 9, [0.0, 1.0])], "m", "f", T0)
        index.store_chunk_vectors(b, [(0, 0, [0.5, 0.5])], "m", "f", T0)
        index.store_chunk_vectors(a, [(0, 0, [0.9, 0.1])], "m", "f", T0)  # 2 chunks -> 1
        conn = index.connection
        assert vector_bits.in_step(conn) == 2
        index.deactivate_documents("c", ["b.md"])
        assert index.cleanup()["orphaned_vectors"] == 1
        assert vector_bits.in_step(conn) == 1
        assert conn.scalar(f"SELECT COUNT(*) FROM {BITS_TABLE}") == 1
        assert [h.document.meta.path for h in index.search_vectors([0.0, 1.0], 5, None)] == ["a.md"]
    finally:
        index.close()
