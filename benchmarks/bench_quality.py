"""Retrieval quality per model set, side by side: nDCG@10 of `search`, `vsearch` and `query`.

    nice -n 10 .venv/bin/python -m benchmarks.bench_quality --set tldr --models stand-in,gemma
    nice -n 10 .venv/bin/python -m benchmarks.bench_quality --set tldr --models gemma+qwen \
        --sample 20
    nice -n 10 .venv/bin/python -m benchmarks.bench_quality --set tldr --models gemma --original
    nice -n 10 .venv/bin/python -m benchmarks.bench_quality --set scifact --models gemma \
        --scifact-docs 1000

Model sets (`--models`, comma-separated; the files come from scripts/prepare_models.py):

  stand-in    all-MiniLM-L6-v2 f16 embeddings; gemma-3-270m for expansion and reranking
  gemma       EmbeddingGemma-300M Q8_0 embeddings; no expansion or rerank model
  gemma+qwen  EmbeddingGemma-300M Q8_0; Qwen2.5-Coder-1.5B-Instruct Q4_K_M for expansion and
              reranking (a yes/no logit reranker)

Modes: `search` (BM25, the default surface's any-term fill), `vsearch` (vectors, no expansion),
`query` (hybrid fusion of both, no expansion or rerank: what a machine with only an embedding
model answers) and, for a set with a generate/rerank model, `query+models` (expansion and
reranking on, the full pipeline). Ours runs in process through the default (seed 000) surface's
use cases, with no request time limit, so a slow model is measured rather than skipped.

`query+models` costs a CPU minute or more per question with a 1.5B model, so it runs on a
fixed sample: the first `--sample N` questions in the set's own order (tldr: judged.json's
order, q01, q02, ...; SciFact: qrels-test.tsv's order, ascending query id), or the N after
the first `--sample-start S`. Every other mode
runs on every question and is reported both over all of them and over the sample, so the
sample's figures compare like with like.

Indexes are built once per (set, embedding model) under `--workdir` (default `.cache/quality`,
git-ignored) and reused by later runs; the LLM cache in each index keeps expansions and rerank
scores, so a rerun of `query+models` costs little. A build that was interrupted (killed, or an
embed that failed) resumes on the next run: the collection is kept and `qmd embed` embeds only
the documents still without vectors. The build has no time limit, and pausing the process group
(SIGSTOP/SIGCONT) while it embeds is harmless.

SciFact's 5,183 abstracts take about 25 minutes to embed with MiniLM on a quiet two-core
machine and about 3.5 times that with EmbeddingGemma; `--scifact-docs N` indexes a fixed
subset instead, for the sample's queries only (or the first `--subset-queries M`, so a small
`query+models` sample reuses a subset built for more): every document judged relevant to one of them
plus N others drawn with a fixed seed (random.Random(34)). Every mode and model set then runs
on that same subset, so they compare with each other (not with full-corpus figures: with
fewer distractors every mode scores higher).

`--original` also runs the original QMD 2.8.3 (scripts/install_original.sh) on the same
embedding GGUF over MCP stdio, on its own index (its `qmd embed`, its 900-token chunks):
`vsearch` = `query` with one `vec` sub-query, `query` = one `lex` and one `vec` sub-query,
both with `rerank: false` (2.8.3 has no `vsearch` tool, and expansion needs its own model).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from benchmarks.bench_judged import DATA as TLDR_DATA
from benchmarks.bench_judged import ndcg_at_10 as binary_ndcg_at_10
from benchmarks.bench_scifact import (
    doc_id_of,
    find_data,
    load_corpus,
    load_qrels,
    load_queries,
    ndcg_at,
    write_markdown,
)
from benchmarks.harness import (
    REPO,
    BenchError,
    McpServer,
    load_average,
    machine,
    original,
    text_of,
)
from benchmarks.model_sets import EMBEDDER_LABEL, MODEL_SETS, MODELS_DIR, ModelSet, parse_model_sets

# the fixed draw of SciFact's subset (the number)
SUBSET_SEED = 34

# -- the judged sets --------------------------------------------------------------------------


@dataclass
class JudgedSet:
    """Questions (id, text, judgement), how a ranked list of document names scores, how a
    result path names its document, and how the corpus folder is written."""

    name: str
    collection: str
    questions: list[tuple[str, str, Any]]
    score: Callable[[list[str], Any], float]
    doc: Callable[[str], str]
    write_corpus: Callable[[Path], int]
    note: str = ""


def tldr_set(limit_docs: int = 0, questions: int = 0) -> JudgedSet:
    """The tldr judged set; `limit_docs`/`questions`: a smoke-sized slice (the pages judged for
    the first `questions` questions plus the first `limit_docs` pages by name)."""
    fixture = json.loads((TLDR_DATA / "judged.json").read_text(encoding="utf-8"))
    chosen = fixture["queries"][: questions or None]
    asked = [(q["id"], q["query"], set(q["expected_files"])) for q in chosen]
    names = sorted(p.name for p in (TLDR_DATA / "pages").glob("*.md"))
    if limit_docs:
        names = sorted({f for q in chosen for f in q["expected_files"]} | set(names[:limit_docs]))

    def write(folder: Path) -> int:
        folder.mkdir(parents=True)
        for name in names:
            shutil.copy(TLDR_DATA / "pages" / name, folder / name)
        return len(names)

    return JudgedSet(
        "tldr" if not limit_docs else f"tldr-{limit_docs}",
        "tldr",
        asked,
        binary_ndcg_at_10,
        lambda path: PurePosixPath(path).name,
        write,
        f"{len(names)} tldr pages, {len(asked)} judged questions, binary relevance",
    )


def scifact_set(subset: int, sample: int) -> JudgedSet:
    data = find_data(None)
    queries, qrels = load_queries(data), load_qrels(data)
    docs = load_corpus(data)
    note = f"BEIR SciFact, {len(docs)} abstracts, {len(qrels)} test queries"
    if subset:
        # the sample's queries only: every other query's relevant documents are not indexed
        qrels = dict(list(qrels.items())[:sample])
        relevant = {d for judged in qrels.values() for d in judged}
        others = sorted(d["_id"] for d in docs if d["_id"] not in relevant)
        drawn = set(random.Random(SUBSET_SEED).sample(others, min(subset, len(others))))
        keep = relevant | drawn
        docs = [d for d in docs if d["_id"] in keep]
        note = (
            f"BEIR SciFact subset: {len(docs)} abstracts (the {len(relevant)} judged relevant "
            f"to the first {len(qrels)} test queries + {len(drawn)} drawn with seed "
            f"{SUBSET_SEED}), those {len(qrels)} queries"
        )

    def write(folder: Path) -> int:
        write_markdown(docs, folder)
        return len(docs)

    return JudgedSet(
        "scifact" if not subset else f"scifact-{subset}-q{len(qrels)}",
        "scifact",
        [(q, queries[q], judged) for q, judged in qrels.items()],
        lambda ranked, relevant: ndcg_at(ranked, relevant, 10),
        doc_id_of,
        write,
        note,
    )


# -- kept indexes -----------------------------------------------------------------------------


def state_env(root: Path, model_set: ModelSet) -> dict[str, str]:
    """Ours: all state under `root` (the layout bench_judged --workdir keeps)."""
    return {
        "HOME": str(root / "home"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "QMD_OFFLINE": "1",
        **model_set.env(),
    }


def qmd_env(root: Path, model_set: ModelSet) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_"))}
    return {**base, **state_env(root, model_set)}


def resumable_build(
    root: Path, judged: JudgedSet, run_step: Callable[[tuple[str, ...]], str], who: str
) -> dict[str, float]:
    """Index and embed `judged`'s corpus under `root` with `run_step` (one `qmd` command,
    raising BenchError when it fails; returns its stdout), resuming an interrupted build.

    `embedded.json` marks a finished build. `indexed.json` marks a corpus written and added
    as a collection: a later run after a kill (or a failed embed) keeps that index and runs
    `qmd embed` again, which embeds only what has no vectors yet, so hours of embedding are
    not lost. Without `indexed.json` nothing costly was done yet and the build starts clean.
    Wall and child CPU seconds add up over the runs; a run killed outright adds nothing."""
    done_marker, indexed_marker = root / "embedded.json", root / "indexed.json"
    if done_marker.is_file():
        return dict(json.loads(done_marker.read_text(encoding="utf-8")))
    if indexed_marker.is_file():
        figures = dict(json.loads(indexed_marker.read_text(encoding="utf-8")))
        print(f"  {who}: resuming the build under {root.name}", file=sys.stderr, flush=True)
    else:
        if root.exists():
            shutil.rmtree(root)  # a corpus or collection half made: nothing worth keeping
        root.mkdir(parents=True)
        started, cpu = time.perf_counter(), _children_cpu()
        figures = {"documents": float(judged.write_corpus(root / "corpus"))}
        run_step(("collection", "add", str(root / "corpus"), "--name", judged.collection))
        figures["build_s"] = time.perf_counter() - started
        figures["cpu_s"] = _children_cpu() - cpu
        figures["runs"] = 0.0
        indexed_marker.write_text(json.dumps(figures) + "\n", encoding="utf-8")
    started, cpu = time.perf_counter(), _children_cpu()
    try:
        said = run_step(("embed",))
        print(f"  {who}: {' / '.join(said.strip().splitlines())}", file=sys.stderr, flush=True)
    finally:
        figures["build_s"] = figures.get("build_s", 0.0) + time.perf_counter() - started
        figures["cpu_s"] = figures.get("cpu_s", 0.0) + _children_cpu() - cpu
        figures["runs"] = figures.get("runs", 0.0) + 1
        indexed_marker.write_text(json.dumps(figures) + "\n", encoding="utf-8")
    figures["load_after"] = load_average()
    done_marker.write_text(json.dumps(figures) + "\n", encoding="utf-8")
    return figures


def build_line(label: str, built: dict[str, float]) -> str:
    """One report line for a kept index (older markers lack the CPU time and run count)."""
    line = f"index ({label}): {int(built['documents'])} docs, "
    line += f"index + embed {built['build_s']:.0f} s"
    if "cpu_s" in built:
        line += f", {built['cpu_s']:.0f} CPU s over {int(built['runs'])} run(s)"
    return line + f" (load {built['load_after']:.1f} after)"


def _children_cpu() -> float:
    """CPU seconds of the finished child processes (the `qmd` commands) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ensure_index(judged: JudgedSet, root: Path, model_set: ModelSet) -> dict[str, float]:
    """Ours: index and embed `judged`'s corpus under `root` unless an embedded index is there
    (resuming a build that was interrupted)."""
    env = qmd_env(root, model_set)
    qmd = str(Path(sys.executable).with_name("qmd"))

    def run_step(args: tuple[str, ...]) -> str:
        print(f"  ours: qmd {' '.join(args[:2])} ({model_set.embed}) ...", file=sys.stderr)
        # no time limit: a niced embed of SciFact takes hours, and a run paused with SIGSTOP
        # must not fail on waking
        done = subprocess.run([qmd, *args], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise BenchError(f"qmd {' '.join(args)} failed: {done.stderr[-1500:]}")
        return done.stdout

    return resumable_build(root, judged, run_step, "ours")


# -- running the modes ------------------------------------------------------------------------


@dataclass
class ModeFigures:
    label: str
    scores: dict[str, float] = field(default_factory=dict)  # question id -> nDCG@10
    seconds: float = 0.0
    load: float = 0.0
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)  # query+models: what the trace said

    def mean(self, ids: Sequence[str]) -> float | None:
        wanted = [self.scores[i] for i in ids if i in self.scores]
        return statistics.fmean(wanted) if len(wanted) == len(ids) and ids else None


def run_ours(
    judged: JudgedSet,
    root: Path,
    model_set: ModelSet,
    modes: Sequence[str],
    sample: Sequence[str],
) -> list[ModeFigures]:
    from adapters.bootstrap import build_app
    from domain.profiles import SEED_000
    from domain.usecases.search import SearchRequest, SearchTrace

    app = build_app(None, state_env(root, model_set))
    searcher = app.searcher.with_profile(SEED_000)
    plain = SearchRequest(
        limit=10, collections=[judged.collection], rerank=False, expand=False, min_score=0
    )
    calls: dict[str, Callable[[str, SearchRequest], list[Any]]] = {
        "search": lambda q, r: searcher.lex_search(q, r),
        "vsearch": lambda q, r: searcher.vector_search(q, r),
        "query": lambda q, r: searcher.hybrid_query(q, replace(r, candidate_limit=30)),
        "query+models": lambda q, r: searcher.hybrid_query(
            q, replace(r, candidate_limit=30, rerank=True, expand=True)
        ),
    }
    results: list[ModeFigures] = []
    try:
        for mode in modes:
            figures = ModeFigures(f"{mode} [{model_set.name}]")
            questions = judged.questions
            if mode == "query+models":
                questions = [q for q in questions if q[0] in set(sample)]
            started = time.perf_counter()
            degraded: dict[str, int] = {}
            for number, (qid, text, judgement) in enumerate(questions, 1):
                asked, cpu = time.perf_counter(), time.process_time()
                trace = SearchTrace() if mode == "query+models" else None
                request = replace(plain, trace=trace)
                ranked = list(
                    dict.fromkeys(
                        judged.doc(r.document.meta.path) for r in calls[mode](text, request)
                    )
                )
                figures.scores[qid] = judged.score(ranked, judgement)
                if trace is not None:
                    figures.details[qid] = {
                        "strong_signal": trace.strong_signal,
                        "expansions": trace.expansions,
                        "degraded": [(d.stage, d.reason) for d in trace.degradations],
                        # what the question cost (nothing much when the LLM cache answered)
                        "wall_s": time.perf_counter() - asked,
                        "cpu_s": time.process_time() - cpu,
                        "load": load_average(),
                    }
                    for stage in _degraded_stages(trace):
                        degraded[stage] = degraded.get(stage, 0) + 1
                    print(
                        f"    {mode} {number}/{len(questions)} {qid}: "
                        f"{figures.scores[qid]:.3f} ({figures.details[qid]['wall_s']:.0f} s, "
                        f"{figures.details[qid]['cpu_s']:.0f} CPU s, load {load_average():.1f}; "
                        f"{time.perf_counter() - started:.0f} s so far)",
                        file=sys.stderr,
                        flush=True,
                    )
            figures.seconds = time.perf_counter() - started
            figures.load = load_average()
            if degraded:
                figures.note = "degraded: " + ", ".join(f"{s} x{n}" for s, n in degraded.items())
            results.append(figures)
            print(f"  {figures.label}: {figures.seconds:.1f} s", file=sys.stderr, flush=True)
    finally:
        app.close()
    return results


def _degraded_stages(trace: Any) -> list[str]:
    return [d.stage for d in trace.degradations]


def run_original(
    judged: JudgedSet, root: Path, model_set: ModelSet, timeout: float
) -> list[ModeFigures]:
    """The original 2.8.3 on the same embedding GGUF, over MCP stdio, on its own index."""
    impl = original(root / "home")
    impl.env.update(model_set.env())
    # the original never reads "none": point unused roles at a real file it never loads here
    for role in ("QMD_GENERATE_MODEL", "QMD_RERANK_MODEL"):
        if impl.env[role] == "none":
            impl.env[role] = str(MODELS_DIR / model_set.embed)

    def run_step(args: tuple[str, ...]) -> str:
        print(f"  original: qmd {' '.join(args[:2])} ...", file=sys.stderr, flush=True)
        impl.home.mkdir(parents=True, exist_ok=True)  # a fresh build starts from an empty root
        done, _ = impl.run(*args, timeout=timeout)
        if done.returncode != 0:
            raise BenchError(
                f"original: qmd {' '.join(args)} exited {done.returncode}: "
                f"{(done.stderr + done.stdout)[-1500:]}"
            )
        return done.stdout[-300:]

    resumable_build(root, judged, run_step, "original")
    searches: dict[str, Callable[[str], list[dict[str, str]]]] = {
        "vsearch": lambda q: [{"type": "vec", "query": q}],
        "query": lambda q: [{"type": "lex", "query": q}, {"type": "vec", "query": q}],
    }
    results: list[ModeFigures] = []
    with McpServer(impl) as server:
        server.initialize()
        for mode, subs in searches.items():
            figures = ModeFigures(f"{mode} [original 2.8.3, {model_set.embed}]")
            started = time.perf_counter()
            errors = 0
            for qid, text, judgement in judged.questions:
                arguments = {
                    "searches": subs(text),
                    "limit": 10,
                    "rerank": False,
                }
                answer, _ = server.call("query", arguments)
                if answer.get("isError"):
                    errors += 1
                    if errors == 1:
                        figures.note = f"first error: {text_of(answer)[:200]}"
                    figures.scores[qid] = 0.0
                    continue
                items = (answer.get("structuredContent") or {}).get("results", [])
                ranked = list(dict.fromkeys(judged.doc(str(i["file"])) for i in items))
                figures.scores[qid] = judged.score(ranked, judgement)
            figures.seconds = time.perf_counter() - started
            figures.load = load_average()
            if errors:
                figures.note = f"{errors} errors; {figures.note}"
            results.append(figures)
    return results


# -- report ----------------------------------------------------------------------------------


def report(
    judged: JudgedSet, results: list[ModeFigures], sample: Sequence[str], builds: list[str]
) -> str:
    everyone = [q[0] for q in judged.questions]
    skipped = everyone.index(sample[0])
    which = "the first" if skipped == 0 else f"after the first {skipped}, the next"
    lines = [
        f"{judged.note}; machine: {machine()}",
        f"sample: {which} {len(sample)} questions ({sample[0]} .. {sample[-1]})",
        *builds,
        "",
        f"| mode [models] | nDCG@10, all {len(everyone)} | nDCG@10, sample {len(sample)} "
        "| seconds | load (1 min) | note |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for figures in results:
        every, part = figures.mean(everyone), figures.mean(sample)
        lines.append(
            f"| {figures.label} | {_cell(every)} | {_cell(part)} | {figures.seconds:.1f} "
            f"| {figures.load:.1f} | {figures.note} |"
        )
    lines += ["", *targets(results, everyone, sample)]
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def targets(
    results: list[ModeFigures], everyone: Sequence[str], sample: Sequence[str]
) -> list[str]:
    """The issue's targets, for each model set measured: hybrid >= max(search, vsearch)."""
    by_label = {f.label: f for f in results}
    lines: list[str] = []
    for name in MODEL_SETS:
        search = by_label.get(f"search [{name}]")
        vsearch = by_label.get(f"vsearch [{name}]")
        checks = [("query", everyone), ("query", sample), ("query+models", sample)]
        if list(sample) == list(everyone):  # the sample is every question: say it once
            del checks[1]
        for mode, ids in checks:
            hybrid = by_label.get(f"{mode} [{name}]")
            if not (search and vsearch and hybrid):
                continue
            values = [hybrid.mean(ids), search.mean(ids), vsearch.mean(ids)]
            if any(v is None for v in values):
                continue
            h, s, v = (float(x) for x in values if x is not None)
            verdict = "PASS" if h >= max(s, v) else "FAIL"
            lines.append(
                f"{mode} [{name}] over {len(ids)}: {h:.4f} >= max(search {s:.4f}, "
                f"vsearch {v:.4f}) {verdict}"
            )
    return lines


# -- main --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--set", choices=("tldr", "scifact"), default="tldr")
    parser.add_argument("--models", default="stand-in,gemma", help=", ".join(MODEL_SETS))
    parser.add_argument(
        "--modes",
        default="search,vsearch,query,query+models",
        help="comma-separated; query+models runs only for sets with a generate/rerank model",
    )
    parser.add_argument("--sample", type=int, default=50, help="questions for query+models")
    parser.add_argument(
        "--sample-start",
        type=int,
        default=0,
        help="the sample begins after this many questions (so a second sample of the same "
        "size does not repeat the first)",
    )
    parser.add_argument("--scifact-docs", type=int, default=0, help="SciFact subset (see above)")
    parser.add_argument(
        "--subset-queries",
        type=int,
        default=0,
        help="SciFact subset: build it for the first N queries (default: --sample), so a "
        "smaller query+models sample reuses a subset index built for more queries",
    )
    parser.add_argument("--limit-docs", type=int, default=0, help="tldr: a smoke-sized slice")
    parser.add_argument("--questions", type=int, default=0, help="tldr: only the first N")
    parser.add_argument("--original", action="store_true", help="also the original 2.8.3")
    parser.add_argument("--original-timeout", type=float, default=4 * 3600)
    parser.add_argument("--workdir", type=Path, default=REPO / ".cache" / "quality")
    parser.add_argument("--json", type=Path, help="also write per-question figures here")
    args = parser.parse_args(argv)
    try:
        model_sets = parse_model_sets(args.models)
        judged = (
            tldr_set(args.limit_docs, args.questions)
            if args.set == "tldr"
            else scifact_set(
                args.scifact_docs, args.subset_queries or args.sample_start + args.sample
            )
        )
        sample = [q[0] for q in judged.questions[args.sample_start :][: args.sample]]
        if not sample:
            parser.error(f"--sample-start {args.sample_start}: no question is left to sample")
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        results: list[ModeFigures] = []
        builds: list[str] = []
        for model_set in model_sets:
            root = args.workdir / f"{judged.name}-{EMBEDDER_LABEL[model_set.embed]}"
            built = ensure_index(judged, root, model_set)
            builds.append(build_line(EMBEDDER_LABEL[model_set.embed], built))
            wanted = [
                m for m in modes if m != "query+models" or (model_set.generate and model_set.rerank)
            ]
            print(f"{model_set.name}: {', '.join(wanted)} ...", file=sys.stderr, flush=True)
            results += run_ours(judged, root, model_set, wanted, sample)
            if args.original:
                label = f"{judged.name}-{EMBEDDER_LABEL[model_set.embed]}-original"
                results += run_original(
                    judged, args.workdir / label, model_set, args.original_timeout
                )
        print(report(judged, results, sample, builds))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            payload = {
                "set": judged.note,
                "sample": sample,
                "machine": machine(),
                "results": {f.label: vars(f) for f in results},
            }
            args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        return 0
    except BenchError as error:
        print(f"bench_quality: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
