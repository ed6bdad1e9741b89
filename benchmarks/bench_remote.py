"""Embedding throughput: the same GGUF in-process vs served over HTTP on loopback.

Builds the seeded speed corpus (benchmarks/corpus.py), indexes it once, then runs `qmd embed`
on fresh copies of that index, alternating in-process (QMD_EMBED_MODEL = the MiniLM GGUF) and
remote (QMD_EMBED_MODEL = openai:minilm@… served by llama_cpp.server via
scripts/model_server.py, with as many threads as the in-process run uses). Throughput is
chunks stored per second of `qmd embed` wall clock, the median over the rounds; the target is
remote within 1.5x of in-process. Both runs must store the same chunks.

    python -m benchmarks.bench_remote                  # 60 documents, 3 rounds
    python -m benchmarks.bench_remote --docs 200 --rounds 5 --json figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import corpus as corpus_mod
from benchmarks.harness import REPO, BenchError, load_average, machine, ours
from scripts.model_server import EMBED_ALIAS, EMBED_FILE, start_server

TARGET_RATIO = 1.5


def _chunks(index: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT hash, seq FROM content_vectors ORDER BY hash, seq")
        return [(str(h), int(s)) for h, s in rows]


def run(args: argparse.Namespace) -> dict[str, Any]:
    model = REPO / ".models" / EMBED_FILE
    if not model.is_file():
        raise BenchError(f"{model} is missing; run: python scripts/prepare_models.py")
    scratch = Path(tempfile.mkdtemp(prefix="qmd-bench-remote-"))
    threads = os.cpu_count() or 1
    server = start_server(with_chat=False, threads=threads)
    try:
        corpus_mod.generate(scratch / "corpus", docs=args.docs, queries=1)
        template = ours(scratch / "template")
        done, _ = template.run("collection", "add", str(scratch / "corpus"), "--name", "bench")
        if done.returncode != 0:
            raise BenchError(f"indexing failed: {done.stderr[-2000:]}")
        modes = {
            "in-process": {"QMD_EMBED_MODEL": str(model)},
            "remote": {"QMD_EMBED_MODEL": server.reference(EMBED_ALIAS)},
        }
        rates: dict[str, list[float]] = {mode: [] for mode in modes}
        walls: dict[str, list[float]] = {mode: [] for mode in modes}
        stored: dict[str, list[tuple[str, int]]] = {}
        loads = [load_average()]
        for number in range(args.rounds):
            for mode, env in modes.items():
                home = scratch / f"{mode}-{number}"
                shutil.copytree(template.home, home)
                impl = ours(home, {**env, "QMD_OFFLINE": "1"})
                done, seconds = impl.run("embed", timeout=args.timeout)
                if done.returncode != 0:
                    raise BenchError(f"{mode} qmd embed failed: {done.stderr[-2000:]}")
                chunks = _chunks(impl.index_path)
                stored.setdefault(mode, chunks)
                rates[mode].append(len(chunks) / seconds)
                walls[mode].append(seconds)
                print(
                    f"round {number + 1} {mode}: {len(chunks)} chunks in {seconds:.2f} s",
                    file=sys.stderr,
                )
        loads.append(load_average())
    finally:
        server.stop()
        if args.keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    local = statistics.median(rates["in-process"])
    remote = statistics.median(rates["remote"])
    return {
        "machine": machine(),
        "load_average": loads,
        "docs": args.docs,
        "rounds": args.rounds,
        "threads": threads,
        "model": EMBED_FILE,
        "chunks": len(stored["in-process"]),
        "same_chunks": stored["in-process"] == stored["remote"],
        "in_process_chunks_per_s": local,
        "remote_chunks_per_s": remote,
        "in_process_wall_s": walls["in-process"],
        "remote_wall_s": walls["remote"],
        "slowdown": local / remote if remote else float("inf"),
    }


def report(figures: dict[str, Any]) -> str:
    slowdown = figures["slowdown"]
    met = slowdown <= TARGET_RATIO and figures["same_chunks"]
    walls = {
        mode: ", ".join(f"{s:.2f}" for s in figures[f"{key}_wall_s"])
        for mode, key in (("in-process", "in_process"), ("remote", "remote"))
    }
    return "\n".join(
        [
            f"Remote embedding benchmark: {figures['docs']} documents "
            f"({figures['chunks']} chunks), {figures['model']}, {figures['threads']} threads, "
            f"median of {figures['rounds']} rounds",
            f"machine: {figures['machine']}; load average {figures['load_average'][0]:.1f} "
            f"before, {figures['load_average'][1]:.1f} after",
            "",
            "| path | chunks/s (median) | qmd embed wall clock per round (s) |",
            "|---|---:|---|",
            f"| in-process (llama.cpp in qmd) | {figures['in_process_chunks_per_s']:.2f} | "
            f"{walls['in-process']} |",
            f"| remote (llama_cpp.server, loopback) | {figures['remote_chunks_per_s']:.2f} | "
            f"{walls['remote']} |",
            "",
            f"same chunks stored: {'yes' if figures['same_chunks'] else 'NO'}",
            f"remote slowdown: {slowdown:.2f}x (target <= {TARGET_RATIO}x): "
            f"{'met' if met else 'NOT met'}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args(argv)
    try:
        figures = run(args)
    except BenchError as exc:
        print(f"bench_remote: {exc}", file=sys.stderr)
        return 1
    print(report(figures))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
