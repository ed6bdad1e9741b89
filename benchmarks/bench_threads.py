"""OpenMP wait policy: query-embedding latency and document throughput, alone and side by side.

llama.cpp's CPU backend runs on OpenMP threads. With the default (busy-wait) policy a thread
spins at every barrier, which is cheap on an idle machine and ruinous when two llama.cpp
processes share the cores, e.g. a `qmd mcp` server answering `vsearch` while `qmd embed`
runs. Our adapter sets `OMP_WAIT_POLICY=PASSIVE` unless the environment says otherwise; this
benchmark prints what that choice costs and saves, using our `LlamaEmbedder` and the MiniLM
GGUF from scripts/prepare_models.py:

* alone: median latency of a one-sentence query embedding; document throughput (chunks of
  about 500 tokens per second);
* side by side: the same query latency while a second process embeds documents, and that
  process's throughput meanwhile;

for PASSIVE (what the adapter sets), libgomp's default (spin a while, then sleep), ACTIVE
(spin without end), a short spin (GOMP_SPINCOUNT=10000), and passive queries beside a
default-policy embedding process.

    python -m benchmarks.bench_threads [--seconds 20] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO, BenchError, machine

DEFAULT_MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"
# OpenMP settings given to a worker. An empty OMP_WAIT_POLICY is what libgomp treats as unset
# (it warns and keeps its default: spin a while, then sleep); our adapter only fills in
# PASSIVE when the variable is absent, so this is how to measure libgomp's own default.
PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}
DEFAULT = {"OMP_WAIT_POLICY": ""}
ACTIVE = {"OMP_WAIT_POLICY": "ACTIVE"}
SHORT_SPIN = {"OMP_WAIT_POLICY": "", "GOMP_SPINCOUNT": "10000"}
# label -> (settings of the query worker, settings of the document worker)
SETTINGS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "PASSIVE": (PASSIVE, PASSIVE),
    "libgomp default": (DEFAULT, DEFAULT),
    "ACTIVE": (ACTIVE, ACTIVE),
    "GOMP_SPINCOUNT=10000": (SHORT_SPIN, SHORT_SPIN),
    "queries PASSIVE, documents default": (PASSIVE, DEFAULT),
    "queries default, documents PASSIVE": (DEFAULT, PASSIVE),
}
# A chunk-sized document: the embedder truncates it to the model's 512 positions.
DOCUMENT = " ".join(
    f"paragraph {n} explains how the service stores and indexes notes" for n in range(60)
)

_WORKER = """
import json, sys, time
from adapters.models.llama import LlamaEmbedder
role, model, seconds, document = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
embedder = LlamaEmbedder(model)
embedder.warm_up()
embedder.embed_queries(["warm up"])
print("ready", flush=True)
sys.stdin.readline()  # go
deadline = time.perf_counter() + seconds
samples = []
while time.perf_counter() < deadline:
    started = time.perf_counter()
    if role == "query":
        embedder.embed_queries([f"how do clients log in with tokens {len(samples)}"])
    else:
        embedder.embed_documents([("note", document)])
    samples.append(time.perf_counter() - started)
print(json.dumps(samples), flush=True)
"""


def _start(
    role: str, settings: dict[str, str], model: Path, seconds: float
) -> subprocess.Popen[str]:
    env = {**os.environ, **settings, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-c", _WORKER, role, str(model), str(seconds), DOCUMENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # libgomp's warning about the empty value
        text=True,
        env=env,
        cwd=REPO,
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        raise BenchError(f"the {role} worker did not start")
    return process


def _finish(process: subprocess.Popen[str]) -> list[float]:
    out, _ = process.communicate(timeout=600)
    if process.returncode != 0:
        raise BenchError(f"a worker failed with exit code {process.returncode}")
    samples: list[float] = json.loads(out.strip().splitlines()[-1])
    return samples


def _go(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()


def measure(
    query_settings: dict[str, str], docs_settings: dict[str, str], model: Path, seconds: float
) -> dict[str, float]:
    query = _start("query", query_settings, model, seconds)
    _go(query)
    alone_query = _finish(query)
    docs = _start("documents", docs_settings, model, seconds)
    _go(docs)
    alone_docs = _finish(docs)
    query, docs = (
        _start("query", query_settings, model, seconds),
        _start("documents", docs_settings, model, seconds),
    )
    _go(query, docs)
    shared_query, shared_docs = _finish(query), _finish(docs)
    return {
        "query_ms_alone": statistics.median(alone_query) * 1000,
        "query_max_ms_alone": max(alone_query) * 1000,
        "chunks_per_s_alone": len(alone_docs) / sum(alone_docs),
        "query_ms_side_by_side": statistics.median(shared_query) * 1000,
        "query_max_ms_side_by_side": max(shared_query) * 1000,
        "chunks_per_s_side_by_side": len(shared_docs) / sum(shared_docs),
    }


def report(figures: dict[str, Any]) -> str:
    lines = [
        f"OpenMP wait policy, {figures['model']}, {figures['seconds']:.0f} s per measurement",
        f"machine: {figures['machine']}",
        "",
        "| OpenMP settings | query embedding, alone (median / max) | documents, alone | "
        "query embedding beside `embed` (median / max) | documents, beside queries |",
        "|---|---:|---:|---:|---:|",
    ]
    for label in SETTINGS:
        row = figures["settings"][label]
        lines.append(
            f"| {label} | {row['query_ms_alone']:.1f} / {row['query_max_ms_alone']:.1f} ms | "
            f"{row['chunks_per_s_alone']:.2f} chunks/s | {row['query_ms_side_by_side']:.1f} / "
            f"{row['query_max_ms_side_by_side']:.1f} ms | "
            f"{row['chunks_per_s_side_by_side']:.2f} chunks/s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if not args.model.is_file():
        print(
            f"bench_threads: {args.model} is missing; run scripts/prepare_models.py",
            file=sys.stderr,
        )
        return 1
    figures: dict[str, Any] = {
        "machine": machine(),
        "model": args.model.name,
        "seconds": args.seconds,
        "settings": {},
    }
    try:
        for label, (query_settings, docs_settings) in SETTINGS.items():
            figures["settings"][label] = measure(
                query_settings, docs_settings, args.model.resolve(), args.seconds
            )
    except BenchError as error:
        print(f"bench_threads: {error}", file=sys.stderr)
        return 1
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    started = time.time()
    code = main()
    print(f"({time.time() - started:.0f} s)", file=sys.stderr)
    sys.exit(code)
