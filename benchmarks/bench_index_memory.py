"""Memory of hostile inputs, measured on real processes (docs/reliability.md, ADR 0022).

1. `qmd collection add` of a folder holding one file of `--big-mb` MiB (a 10 MiB file is at
   the indexing limit): peak RSS and wall clock; then the same with a 50 MB file, which is
   skipped without being read.
2. A `qmd mcp` server answering `search` for CJK queries of growing length over the handbook
   fixture (whose documents are Chinese in part): peak RSS of the server and seconds per
   query, showing the cost per FTS5 token that a query length bound has to cap.

    .venv/bin/python -m benchmarks.bench_index_memory [--big-mb 10] [--cjk 4000,40000] [--json F]

Queries longer than the wire section's 4,000-character bound are refused once that bound is
in place; the benchmark then reports the refusal instead of a cost.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO, McpServer, load_average, machine, ours, text_of

HANDBOOK = REPO / "fixtures" / "corpora" / "handbook"
WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
]


def _big_file(folder: Path, size: int, seed: int) -> None:
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    with open(folder / "big.md", "w", encoding="utf-8") as handle:
        handle.write("# Big\n")
        written = 6
        while written < size - 100:
            line = " ".join(rng.choice(WORDS) for _ in range(12)) + "\n"
            handle.write(line)
            written += len(line)


def index_big_file(root: Path, mib: float, seed: int) -> dict[str, Any]:
    impl = ours(root / "state")
    folder = root / f"big-{mib}"
    _big_file(folder, int(mib * 1024 * 1024), seed)
    rc, seconds, peak_kib, tail = impl.run_measured("collection", "add", str(folder))
    return {
        "file_mib": mib,
        "rc": rc,
        "seconds": round(seconds, 2),
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "skipped": "file too large" in tail,
        "indexed": rc == 0 and "file too large" not in tail,
    }


def cjk_queries(root: Path, lengths: list[int], seed: int) -> list[dict[str, Any]]:
    impl = ours(root / "cjk-state")
    corpus = root / "handbook"
    shutil.copytree(HANDBOOK, corpus)
    done, _ = impl.run("collection", "add", str(corpus), "--name", "hb")
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    chars = sorted(
        {
            ch
            for path in corpus.rglob("*.md")
            for ch in path.read_text(encoding="utf-8")
            if 0x4E00 <= ord(ch) <= 0x9FFF
        }
    )
    rng = random.Random(seed)
    rows = []
    for length in lengths:
        query = "".join(rng.choice(chars) for _ in range(length))
        with McpServer(impl) as server:
            server.initialize()
            before = server.peak_rss_kib() or 0
            result, seconds = server.call("search", {"query": query})
            after = server.peak_rss_kib() or 0
        rows.append(
            {
                "chars": length,
                "seconds": round(seconds, 3),
                "server_peak_rss_mib": round(after / 1024, 1),
                "growth_mib": round((after - before) / 1024, 1),
                "refused": bool(result.get("isError")),
                "answer": text_of(result)[:80],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--big-mb", type=float, default=10.0)
    parser.add_argument("--cjk", default="4000,40000")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    lengths = [int(n) for n in args.cjk.split(",") if n]
    root = Path(tempfile.mkdtemp(prefix="qmd-bench-index-memory-"))
    try:
        figures: dict[str, Any] = {
            "machine": machine(),
            "load_average_at_start": load_average(),
            "big_files": [
                index_big_file(root / "a", args.big_mb, args.seed),
                index_big_file(root / "b", 50.0, args.seed),
            ],
            "cjk_queries": cjk_queries(root, lengths, args.seed),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"machine: {figures['machine']}")
    for row in figures["big_files"]:
        what = "skipped (too large)" if row["skipped"] else f"indexed, rc {row['rc']}"
        print(
            f"collection add, one {row['file_mib']:g} MiB file: {what}, "
            f"peak RSS {row['peak_rss_mib']} MiB, {row['seconds']} s"
        )
    for row in figures["cjk_queries"]:
        outcome = "refused" if row["refused"] else "answered"
        print(
            f"search of {row['chars']:,} CJK characters: {outcome} in {row['seconds']} s, "
            f"server peak RSS {row['server_peak_rss_mib']} MiB (+{row['growth_mib']} MiB)"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
