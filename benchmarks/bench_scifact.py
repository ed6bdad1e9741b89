"""Retrieval quality on BEIR SciFact (5,183 abstracts, 300 test queries), through our MCP tools.

Each abstract becomes `<doc-id>.md` (`# {title}`, a blank line, the abstract), indexed with
`qmd collection add`; each test query then goes through a real `qmd mcp` server over stdio,
and the returned file names map back to SciFact doc ids. Standard BEIR metrics (as computed by
pytrec_eval): nDCG@10 with linear gains over the graded qrels, and Recall@100.

Modes (`--modes`, comma-separated, or `all`):
  search       spec surface `search` (BM25; all-terms matches first, then any-term matches)
  vsearch      spec surface `vsearch` (needs `qmd embed`, run first; minScore 0)
  query        spec surface `query` (hybrid; needs `qmd embed`)
  compat-lex   ours, `qmd mcp --compat 2.8.3`, `query` with one lex sub-query and rerank:false:
               the original's strict all-terms (AND) rule, for the decision record
  original-lex the original QMD 2.8.3 itself, same call as compat-lex (needs it installed)

    .venv/bin/python -m benchmarks.bench_scifact [--modes search,compat-lex] [--json out.json]
    .venv/bin/python -m benchmarks.bench_scifact --modes search,vsearch,query --models gemma

Embedding the abstracts is the long part (about 25 minutes on two cores with MiniLM). To compare
backends on the same vectors: embed once into SQLite with `--keep`, then pass the kept folder
to `--reuse DIR`: with `--backend sqlite` its index is queried as is; with `--backend postgres`
it is copied into a fresh schema by `qmd index copy` (vectors included) and queried there.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from benchmarks.harness import (
    REPO,
    BenchError,
    Implementation,
    McpServer,
    machine,
    original,
    ours,
    text_of,
)
from benchmarks.model_sets import MODEL_SETS, parse_model_sets

COLLECTION = "scifact"
ALL_MODES = ("search", "vsearch", "query", "compat-lex", "original-lex")
DEFAULT_MODES = ("search", "compat-lex")
EMBED_MODES = {"vsearch", "query"}
PREPARED_EMBED = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"
# nDCG@10 targets; `query` must reach the better of search and vsearch.
TARGETS = {"search": 0.66, "vsearch": 0.62}
# Where the data set usually lives, relative to the repository (the first one found wins).
DATA_CANDIDATES = (
    REPO / "shared" / "data" / "beir-scifact",
    REPO.parent / "shared" / "data" / "beir-scifact",
)

Qrels = dict[str, dict[str, int]]
Run = dict[str, list[str]]


# -- data -------------------------------------------------------------------------------------


def find_data(explicit: Path | None) -> Path:
    candidates = [explicit] if explicit else [Path(p) for p in _env_data()] + list(DATA_CANDIDATES)
    for candidate in candidates:
        if candidate and (candidate / "corpus.jsonl.gz").exists():
            return candidate
    raise BenchError(
        "BEIR SciFact not found (corpus.jsonl.gz, queries.jsonl, qrels-test.tsv); pass "
        "--data DIR or set QMD_SCIFACT_DIR. Looked in: "
        + ", ".join(str(c) for c in candidates if c)
    )


def _env_data() -> list[str]:
    value = os.environ.get("QMD_SCIFACT_DIR")
    return [value] if value else []


def load_corpus(data: Path) -> list[dict[str, str]]:
    with gzip.open(data / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_queries(data: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    with (data / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                item = json.loads(line)
                queries[str(item["_id"])] = item["text"]
    return queries


def load_qrels(data: Path) -> Qrels:
    qrels: Qrels = {}
    with (data / "qrels-test.tsv").open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        next(reader)  # header: query-id, corpus-id, score
        for row in reader:
            if len(row) >= 3:
                qrels.setdefault(row[0].strip(), {})[row[1].strip()] = int(row[2])
    return qrels


def write_markdown(docs: list[dict[str, str]], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        title = " ".join(doc["title"].split())
        (folder / f"{doc['_id']}.md").write_text(f"# {title}\n\n{doc['text']}\n", encoding="utf-8")


def doc_id_of(file: str) -> str:
    """`scifact/4983.md`, `qmd://scifact/4983.md` -> `4983`."""
    return PurePosixPath(file).name.removesuffix(".md")


# -- metrics (BEIR / pytrec_eval definitions) -------------------------------------------------


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    wanted = {d for d, g in relevant.items() if g > 0}
    return len(wanted.intersection(ranked[:k])) / len(wanted) if wanted else 0.0


def evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10 and Recall@100 over every judged query; a query with no results scores 0
    (the `trec_eval -c` convention). BEIR's own script averages only over the queries that got
    results (pytrec_eval drops the others); that variant is kept as `*_answered`."""
    ndcg = {q: ndcg_at(run.get(q, []), rel, 10) for q, rel in qrels.items()}
    recall = {q: recall_at(run.get(q, []), rel, 100) for q, rel in qrels.items()}
    answered = [q for q in qrels if run.get(q)]
    return {
        "ndcg@10": statistics.fmean(ndcg.values()),
        "recall@100": statistics.fmean(recall.values()),
        "ndcg@10_answered": statistics.fmean(ndcg[q] for q in answered) if answered else 0.0,
        "recall@100_answered": statistics.fmean(recall[q] for q in answered) if answered else 0.0,
        "answered": float(len(answered)),
    }


# -- running the modes ------------------------------------------------------------------------


@dataclass
class ModeResult:
    mode: str
    available: bool = True
    reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    errors: int = 0
    empty: int = 0
    median_ms: float = 0.0
    first_error: str = ""


def _arguments(mode: str, query: str, limit: int) -> tuple[str, dict[str, Any]]:
    if mode in ("compat-lex", "original-lex"):
        lex = {"searches": [{"type": "lex", "query": query}], "limit": limit, "rerank": False}
        return "query", lex
    return mode, {"query": query, "limit": limit, "minScore": 0}


def run_mode(
    server: McpServer, mode: str, queries: dict[str, str], qrels: Qrels, limit: int
) -> ModeResult:
    result = ModeResult(mode)
    run: Run = {}
    timings: list[float] = []
    for number, query_id in enumerate(qrels):
        tool, arguments = _arguments(mode, queries[query_id], limit)
        answer, seconds = server.call(tool, arguments)
        timings.append(seconds)
        if answer.get("isError"):
            message = text_of(answer)[:300]
            if number == 0 and mode not in ("compat-lex", "original-lex"):
                return ModeResult(mode, available=False, reason=message)
            result.errors += 1
            result.first_error = result.first_error or f"{queries[query_id]!r}: {message}"
            continue
        items = (answer.get("structuredContent") or {}).get("results", [])
        ranked = list(dict.fromkeys(doc_id_of(str(item["file"])) for item in items))
        result.empty += not ranked
        run[query_id] = ranked
    result.metrics = evaluate(run, qrels)
    result.median_ms = statistics.median(timings) * 1000
    return result


def index(impl: Implementation, folder: Path) -> float:
    done, seconds = impl.run("collection", "add", str(folder), "--name", COLLECTION, timeout=1200)
    if done.returncode != 0:
        raise BenchError(
            f"{impl.label}: `qmd collection add` exited {done.returncode}: {done.stderr[-800:]}"
        )
    return seconds


def embed(impl: Implementation, timeout: float) -> tuple[bool, str, float]:
    """Run `qmd embed`; returns (ok, reason when not ok, seconds)."""
    try:
        done, seconds = impl.run("embed", timeout=timeout)
    except FileNotFoundError as error:
        return False, str(error), 0.0
    except Exception as error:  # a timeout, mostly
        return False, f"`qmd embed` did not finish: {error}", timeout
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        return False, (lines[-1] if lines else f"exit {done.returncode}"), seconds
    return True, "", seconds


def with_server(
    impl: Implementation, args: tuple[str, ...], work: Callable[[McpServer], None]
) -> None:
    with McpServer(impl, *args) as server:
        server.initialize()
        work(server)


# -- report ----------------------------------------------------------------------------------


def report(results: list[ModeResult], meta: dict[str, Any]) -> str:
    lines = [
        f"BEIR SciFact: {meta['docs']} docs, {meta['queries']} test queries, limit "
        f"{meta['limit']}, through MCP stdio",
        f"machine: {meta['machine']}",
        _build_line(meta),
        "",
        f"{'mode':<14} {'nDCG@10':>8} {'R@100':>7} {'median':>10} {'empty':>6} {'errors':>6}"
        "  target (nDCG@10)",
        "-" * 84,
    ]
    by_mode = {r.mode: r for r in results}
    for r in results:
        if not r.available:
            lines.append(f"{r.mode:<14} unavailable: {r.reason}")
            continue
        lines.append(
            f"{r.mode:<14} {r.metrics['ndcg@10']:>8.4f} {r.metrics['recall@100']:>7.4f} "
            f"{r.median_ms:>7.2f} ms {r.empty:>6} {r.errors:>6}  {_target(r, by_mode)}"
        )
    lines.append("-" * 84)
    for r in results:
        if r.available and r.empty:
            lines.append(
                f"{r.mode}: over the {int(r.metrics['answered'])} queries with results only "
                f"(BEIR script convention): nDCG@10 {r.metrics['ndcg@10_answered']:.4f}, "
                f"R@100 {r.metrics['recall@100_answered']:.4f}"
            )
        if r.first_error:
            lines.append(f"{r.mode}: first error: {r.first_error}")
    lines.append(
        "reference: BM25 nDCG@10 0.665 (BEIR paper), 0.6647 / R@100 0.9076 (Anserini multifield)"
    )
    return "\n".join(lines)


def _build_line(meta: dict[str, Any]) -> str:
    if meta.get("reused"):
        line = f"backend: {meta['backend']}; index reused from an earlier --keep run"
        if "copy_s" in meta:
            line += f", copied into PostgreSQL by `qmd index copy` in {meta['copy_s']:.1f} s"
        return line
    line = f"backend: {meta['backend']}; indexing (ours, collection add): {meta['index_s']:.2f} s"
    return line + (f"; embed: {meta['embed_s']:.1f} s" if meta.get("embed_s") else "")


def _target(result: ModeResult, by_mode: dict[str, ModeResult]) -> str:
    score = result.metrics["ndcg@10"]
    if result.mode in TARGETS:
        goal = TARGETS[result.mode]
        return f">= {goal:.2f} {'PASS' if score >= goal else 'FAIL'}"
    if result.mode == "query":
        others = [
            by_mode[m].metrics["ndcg@10"]
            for m in ("search", "vsearch")
            if m in by_mode and by_mode[m].available
        ]
        if not others:
            return ">= max(search, vsearch): n/a (neither measured)"
        goal = max(others)
        return f">= max(search, vsearch) = {goal:.4f} {'PASS' if score >= goal else 'FAIL'}"
    return "(strict AND, for comparison)"


# -- main --------------------------------------------------------------------------------------


def parse_modes(text: str) -> list[str]:
    modes = list(ALL_MODES) if text == "all" else [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in ALL_MODES]
    if unknown:
        raise BenchError(f"unknown mode(s) {unknown}; choose from {', '.join(ALL_MODES)} or all")
    return modes


def pg_url(explicit: str | None) -> str:
    if explicit:
        return explicit
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "postgres.sh"), "start"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def drop_pg_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def copy_to_postgres(impl: Implementation, source: Path, url: str) -> float:
    """`qmd index copy` the kept SQLite index into the (empty) schema `url`; returns seconds."""
    done, seconds = impl.run("index", "copy", str(source), url, timeout=3600)
    if done.returncode != 0:
        raise BenchError(f"`qmd index copy` exited {done.returncode}: {done.stderr[-800:]}")
    print(done.stdout.strip().splitlines()[-1], file=sys.stderr)
    return seconds


def reused_index(folder: Path) -> Path:
    """The SQLite index of a folder kept by `--keep` (it holds `corpus/` and `ours/`)."""
    index_file = folder / "ours" / "index.sqlite"
    if not (folder / "corpus").is_dir() or not index_file.exists():
        raise BenchError(f"--reuse {folder}: not a folder kept by --keep (no corpus/, ours/)")
    return index_file


def run(args: argparse.Namespace) -> int:
    modes = parse_modes(args.modes)
    data = find_data(args.data)
    docs = load_corpus(data)
    queries = load_queries(data)
    qrels = load_qrels(data)
    if args.queries:
        qrels = dict(list(qrels.items())[: args.queries])
    reuse = args.reuse
    source_index = reused_index(reuse) if reuse else None
    workdir = reuse or Path(tempfile.mkdtemp(prefix="qmd-bench-scifact-"))
    schema = f"scifact_{os.getpid()}"
    try:
        folder = workdir / "corpus"
        if not reuse:
            write_markdown(docs, folder)
        extra: dict[str, str] = {}
        if args.models:
            (model_set,) = parse_model_sets(args.models)
            extra.update(model_set.env())
        model = args.embed_model or extra.get("QMD_EMBED_MODEL")
        model = model or os.environ.get("QMD_EMBED_MODEL")
        if not model and PREPARED_EMBED.exists():
            model = str(PREPARED_EMBED)
        if model:
            extra["QMD_EMBED_MODEL"] = model
        for role in ("QMD_RERANK_MODEL", "QMD_GENERATE_MODEL"):
            if os.environ.get(role) and role not in extra:
                extra[role] = os.environ[role]
        impl = ours(workdir / "ours", extra)
        if args.backend == "postgres":
            # a fresh schema on the PostgreSQL server (scripts/postgres.sh unless --pg-url)
            impl.env["INDEX_PATH"] = f"{pg_url(args.pg_url)}?schema={schema}"
        meta: dict[str, Any] = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "machine": machine(),
            "docs": len(docs),
            "queries": len(qrels),
            "limit": args.limit,
            "modes": modes,
            "embed_model": model,
            "backend": args.backend,
            "index_s": 0.0,
        }
        if source_index and args.backend == "postgres":
            print(f"ours: qmd index copy {source_index} -> PostgreSQL ...", file=sys.stderr)
            meta["reused"] = str(source_index)
            meta["copy_s"] = copy_to_postgres(impl, source_index, impl.env["INDEX_PATH"])
        elif source_index:
            meta["reused"] = str(source_index)
        else:
            print(f"ours: indexing {len(docs)} docs ({args.backend}) ...", file=sys.stderr)
            meta["index_s"] = index(impl, folder)
        results: list[ModeResult] = []
        spec_modes = [m for m in modes if m in ("search", "vsearch", "query")]
        embed_failure = ""
        if EMBED_MODES.intersection(modes) and not source_index:
            print("ours: qmd embed ...", file=sys.stderr)
            ok, reason, seconds = embed(impl, args.embed_timeout)
            if ok:
                meta["embed_s"] = seconds
            else:
                embed_failure = f"`qmd embed` failed: {reason}"
        if spec_modes:

            def spec_work(server: McpServer) -> None:
                for mode in spec_modes:
                    if mode in EMBED_MODES and embed_failure:
                        results.append(ModeResult(mode, available=False, reason=embed_failure))
                        continue
                    print(f"ours: {mode} ...", file=sys.stderr)
                    results.append(run_mode(server, mode, queries, qrels, args.limit))

            with_server(impl, (), spec_work)
        if "compat-lex" in modes:
            print("ours: compat-lex ...", file=sys.stderr)
            with_server(
                impl,
                ("--compat", "2.8.3"),
                lambda s: results.append(run_mode(s, "compat-lex", queries, qrels, args.limit)),
            )
        if "original-lex" in modes:
            try:
                orig = original(workdir / "original")
            except BenchError as error:
                results.append(ModeResult("original-lex", available=False, reason=str(error)))
            else:
                print("original: indexing, then original-lex ...", file=sys.stderr)
                meta["original_index_s"] = index(orig, folder)
                with_server(
                    orig,
                    (),
                    lambda s: results.append(
                        run_mode(s, "original-lex", queries, qrels, args.limit)
                    ),
                )
        order = {m: i for i, m in enumerate(ALL_MODES)}
        results.sort(key=lambda r: order[r.mode])
        print(report(results, meta))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            payload = {"meta": meta, "results": [vars(r) for r in results]}
            args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
            print(f"\nfigures written to {args.json}")
        return 0
    finally:
        if args.backend == "postgres" and not args.keep:
            drop_pg_schema(pg_url(args.pg_url), schema)
        if args.keep or reuse:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="BEIR SciFact nDCG@10 / Recall@100 over MCP")
    parser.add_argument("--data", type=Path, help="folder with the BEIR SciFact files")
    parser.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma-separated from {', '.join(ALL_MODES)}, or all (default: %(default)s)",
    )
    parser.add_argument("--limit", type=int, default=100, help="results per query (default 100)")
    parser.add_argument("--queries", type=int, default=0, help="only the first N test queries")
    parser.add_argument("--embed-model", help="embedding model for vsearch/query (GGUF path)")
    parser.add_argument(
        "--models",
        choices=sorted(MODEL_SETS),
        help="a model set of benchmarks/model_sets.py for all three roles (the `query` tool "
        "then expands and reranks within the server's request time limit; "
        "bench_quality.py measures that pipeline without a limit)",
    )
    parser.add_argument("--embed-timeout", type=float, default=3600, help="seconds for embed")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument(
        "--reuse",
        type=Path,
        metavar="DIR",
        help="query the embedded index of a folder kept by --keep instead of building one "
        "(--backend postgres: copied into a fresh schema with `qmd index copy`)",
    )
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="where ours keeps the index (postgres: a fresh schema, dropped afterwards)",
    )
    parser.add_argument(
        "--pg-url", help="PostgreSQL server URL (default: scripts/postgres.sh start)"
    )
    args = parser.parse_args(argv)
    try:
        return run(args)
    except BenchError as error:
        print(f"bench_scifact: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
