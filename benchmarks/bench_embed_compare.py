"""`qmd embed` side by side: ours and the original 2.8.3, same corpus, same MiniLM GGUF file.

Each implementation indexes the seeded speed corpus (benchmarks/corpus.py) into its own
scratch home and runs its `qmd embed` with `all-MiniLM-L6-v2-f16.gguf` (from
scripts/prepare_models.py). Ours embeds with `QMD_EMBED_FORMAT=embeddinggemma` and
`QMD_FIT_CHUNKS=0` (the original's 900-token chunks), so both feed
the model the same texts (the original formats every non-Qwen model that way). Throughput is
chunks (counted in each index's `content_vectors`) per second of the whole `qmd embed`
process, model loading included. The two runs take turns, so neither competes with the other.

    python -m benchmarks.bench_embed_compare                # 100 documents
    python -m benchmarks.bench_embed_compare --docs 300 --json figures.json
    python -m benchmarks.bench_embed_compare --ours-first   # the other order, on a busy machine

The corpus stays clear of the input that aborts the original (a text of 511 or 512 tokens,
see tests/integration/test_embedding_context_edge.py): an abort is reported, not timed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import corpus as corpus_mod
from benchmarks.harness import REPO, BenchError, Implementation, load_average, machine, original
from benchmarks.harness import ours as ours_impl

DEFAULT_EMBED_MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"
# gemma as "reranker"/"generator" is never loaded by `embed`; real files keep both happy.
OTHER_MODEL = REPO / ".models" / "gemma-3-270m-q4_k_m.gguf"


def _chunk_count(index: Path) -> int:
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM content_vectors").fetchone()[0])


def _models_env(embed_model: Path) -> dict[str, str]:
    return {
        "QMD_EMBED_MODEL": str(embed_model),
        "QMD_RERANK_MODEL": str(OTHER_MODEL.resolve()),
        "QMD_GENERATE_MODEL": str(OTHER_MODEL.resolve()),
    }


def measure(impl: Implementation, corpus: Path, timeout: float) -> dict[str, Any]:
    done, index_s = impl.run("collection", "add", str(corpus), "--name", "bench")
    if done.returncode != 0:
        raise BenchError(f"{impl.label}: indexing failed: {done.stderr[-2000:]}")
    load_before = load_average()
    done, embed_s = impl.run("embed", timeout=timeout)
    load_after = load_average()
    if done.returncode != 0:
        raise BenchError(f"{impl.label}: qmd embed exited {done.returncode}: {done.stderr[-1500:]}")
    chunks = _chunk_count(impl.index_path)
    print(f"{impl.label}: {chunks} chunks in {embed_s:.1f} s", file=sys.stderr)
    return {
        "index_s": index_s,
        "embed_s": embed_s,
        "chunks": chunks,
        "chunks_per_s": chunks / embed_s if embed_s else 0.0,
        "load_average": [load_before, load_after],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    embed_model = Path(args.embed_model).resolve()
    for needed in (embed_model, OTHER_MODEL):
        if not needed.is_file():
            raise BenchError(f"{needed} is missing; run: python scripts/prepare_models.py")
    scratch = Path(tempfile.mkdtemp(prefix="qmd-bench-embed-"))
    try:
        corpus_mod.generate(scratch / "corpus", docs=args.docs)
        env = _models_env(embed_model)
        theirs = original(scratch / "original")
        theirs.env.update(env)  # before its first `collection add`, which writes index.yml
        mine = ours_impl(
            scratch / "ours", {**env, "QMD_EMBED_FORMAT": "embeddinggemma", "QMD_FIT_CHUNKS": "0"}
        )
        figures: dict[str, Any] = {
            "machine": machine(),
            "docs": args.docs,
            "embed_model": embed_model.name,
        }
        order = (mine, theirs) if args.ours_first else (theirs, mine)
        figures["order"] = [impl.label for impl in order]
        for impl in order:
            figures[impl.label] = measure(impl, scratch / "corpus", args.embed_timeout)
        figures["ratio"] = figures["ours"]["chunks_per_s"] / figures["original"]["chunks_per_s"]
        return figures
    finally:
        if args.keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def report(figures: dict[str, Any]) -> str:
    lines = [
        f"qmd embed side by side: {figures['docs']} documents, {figures['embed_model']}",
        f"machine: {figures['machine']}; run order: {' then '.join(figures['order'])}",
        "",
        "| implementation | chunks | qmd embed wall clock | throughput | load average |",
        "|---|---:|---:|---:|---:|",
    ]
    for label in ("original", "ours"):
        f = figures[label]
        lines.append(
            f"| {label} | {f['chunks']} | {f['embed_s']:.1f} s | "
            f"{f['chunks_per_s']:.2f} chunks/s | "
            f"{f['load_average'][0]:.1f} → {f['load_average'][1]:.1f} |"
        )
    lines.append("")
    lines.append(f"ours / original throughput: {figures['ratio']:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--embed-model", default=str(DEFAULT_EMBED_MODEL))
    parser.add_argument("--embed-timeout", type=float, default=3600)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--ours-first",
        action="store_true",
        help="embed with ours first (default: the original first); on a shared machine run "
        "both orders",
    )
    args = parser.parse_args(argv)
    started = time.time()
    try:
        figures = run(args)
    except BenchError as error:
        print(f"bench_embed_compare: {error}", file=sys.stderr)
        return 1
    figures["wall_s"] = time.time() - started
    print(report(figures))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
