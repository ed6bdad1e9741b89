"""How much memory do the SQLite prefilter's sign bits cost a process with several connections
to one index, and how many times are they read (REQ-VEC-SIGNSHARE-001)?

    .venv/bin/python -m benchmarks.bench_sign_share                       # 100,000 vectors
    .venv/bin/python -m benchmarks.bench_sign_share --vectors 2000 --connections 2  # smoke
    .venv/bin/python -m benchmarks.bench_sign_share --adapters OTHER_CHECKOUT  # another tree

1. Build an index of `--vectors` random vectors (`--dims`, 10 chunks a document), written
   straight into `vectors_vec` and quantized once, as `bench_scale` does.
2. In a fresh process (its memory is the figure): open `--connections` connections, as a
   server's worker threads do, and run one vector search on each in turn; then store one new
   vector through another connection (an embed) and search on each again.
3. Print the anonymous resident memory (`RssAnon`: the matrices, not the memory-mapped file)
   before the searches, after them and after the write, and how many times the bits were read
   (`sign_scan.loads()`, where the tree has it).

`--adapters DIR` runs step 2 with the `adapters` package of another checkout (e.g. `main`'s,
to compare before / after on one machine and one file).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
T0 = "2025-01-01T00:00:00.000Z"
CHUNKS = 10
SEED = 20261126


def build(path: Path, vectors: int, dims: int) -> None:
    from adapters.sqlite.schema import ensure_vec_table
    from adapters.sqlite.store import SqliteIndex

    rng = np.random.default_rng(SEED)
    docs = -(-vectors // CHUNKS)
    index = SqliteIndex.open(path)
    try:
        hashes = [hashlib.sha256(f"d{i}".encode()).hexdigest() for i in range(docs)]
        with index.transaction():
            for i, digest in enumerate(hashes):
                index.upsert_document("bench", f"d{i}.md", f"d{i}", digest, f"doc {i}", T0, T0)
            conn = index.connection
            ensure_vec_table(conn, dims)
            keys = [(hashes[i // CHUNKS], i % CHUNKS) for i in range(vectors)]
            conn.executemany(
                "INSERT INTO content_vectors (hash, seq, pos, model, embed_fingerprint, "
                "total_chunks, embedded_at) VALUES (?, ?, ?, 'm', 'f', ?, ?)",
                ((h, s, s * 100, CHUNKS, T0) for h, s in keys),
            )
            for start in range(0, vectors, 10_000):
                block = rng.standard_normal((min(10_000, vectors - start), dims))
                conn.executemany(
                    "INSERT INTO vectors_vec (hash_seq, embedding) VALUES (?, ?)",
                    (
                        (f"{h}_{s}", row.astype(np.float32).tobytes())
                        for (h, s), row in zip(keys[start : start + len(block)], block, strict=True)
                    ),
                )
        index.refresh_vector_prefilter()
    finally:
        index.close()


def rss_anon_mib() -> float:
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(path: Path, connections: int, dims: int) -> dict[str, Any]:
    """Step 2, in this (fresh) process."""
    from adapters.sqlite import sign_scan
    from adapters.sqlite.driver import connect
    from adapters.sqlite.store import SqliteIndex

    def loads() -> int | None:
        counter = getattr(sign_scan, "loads", None)
        return None if counter is None else int(counter())

    rng = np.random.default_rng(SEED + 1)
    query = rng.standard_normal(dims).tolist()
    indexes = [SqliteIndex(connect(path), prefilter_min_vectors=0) for _ in range(connections)]
    try:
        for index in indexes:  # each connection opened and its schema read
            assert index.vector_dimensions() == dims
        figures: dict[str, Any] = {"rss_before_mib": round(rss_anon_mib(), 1)}
        before = loads()
        for index in indexes:
            assert index.search_vectors(query, 10, None)
        figures["rss_after_searches_mib"] = round(rss_anon_mib(), 1)
        after = loads()
        writer = SqliteIndex(connect(path), prefilter_min_vectors=0)
        try:
            digest = hashlib.sha256(b"new").hexdigest()
            writer.upsert_document("bench", "new.md", "new", digest, "new", T0, T0)
            writer.store_chunk_vectors(digest, [(0, 0, query)], "m", "f", T0)
        finally:
            writer.close()
        for index in indexes:
            hits = index.search_vectors(query, 1, None)
            assert hits and hits[0].document.meta.path == "new.md"
        figures["rss_after_write_mib"] = round(rss_anon_mib(), 1)
        reloaded = loads()
        if before is not None and after is not None and reloaded is not None:
            figures["loads_first_searches"] = after - before
            figures["loads_after_write"] = reloaded - after
        figures["matrix_mib"] = round(
            sum(m.words.nbytes + m.rowids.nbytes for m in _matrices(indexes)) / 2**20, 2
        )
        figures["distinct_matrices"] = len(_matrices(indexes))
        return figures
    finally:
        for index in indexes:
            index.close()


def _matrices(indexes: list[Any]) -> list[Any]:
    """The distinct sign matrices the connections use (per connection before the shared
    copy, one shared after)."""
    found: dict[int, Any] = {}
    for index in indexes:
        held = getattr(index._signs, "held", index._signs)
        if held is not None and held is not False:
            found[id(held)] = held
    return list(found.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--adapters", help="a checkout whose adapters step 2 runs")
    parser.add_argument("--workdir", help="keep the index here (default: a temporary folder)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # step 2's own process
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(Path(args.measure), args.connections, args.dims)))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.workdir or scratch)
        work.mkdir(parents=True, exist_ok=True)
        path = work / f"signshare-{args.vectors}-{args.dims}.sqlite"
        if not path.exists():
            build(path, args.vectors, args.dims)
        tree = Path(args.adapters).resolve() if args.adapters else REPO
        # this file run with the other tree's adapters first on the path
        child = (
            f"import runpy, sys; sys.path.insert(0, {str(tree)!r}); "
            f"runpy.run_path({__file__!r}, run_name='__main__')"
        )
        done = subprocess.run(
            [
                *(sys.executable, "-c", child, "--measure", str(path)),
                *("--connections", str(args.connections), "--dims", str(args.dims)),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        figures = json.loads(done.stdout.strip().splitlines()[-1])
    from benchmarks.harness import machine

    print(f"sign bits shared per process, {args.vectors} vectors x {args.dims}; {machine()}")
    print(f"  adapters: {tree}; {args.connections} connections")
    for key, value in figures.items():
        print(f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
