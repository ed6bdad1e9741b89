"""Hybrid fusion weightings on two judged sets at once: BEIR SciFact and the tldr questions.

`query`'s keyword/vector weighting was first tuned on the 54 tldr questions alone
(docs/decisions/0031) and then lost 0.04 nDCG@10 on SciFact, where BM25 is the stronger list.
This runs every weighting below on both sets, in process, through the default surface's use
cases (no expansion or rerank model, as `bench_scifact` and `bench_judged` run them), from
indexes those two benchmarks kept, so a change of weights is judged on both:

    .venv/bin/python -m benchmarks.bench_scifact --modes query --keep   # prints the kept folder
    .venv/bin/python -m benchmarks.bench_judged --workdir .cache/tldr   # keeps its index there
    .venv/bin/python -m benchmarks.bench_fusion --scifact KEPT_FOLDER --tldr .cache/tldr

`--embed-model` names the GGUF the kept indexes were embedded with (MiniLM by default);
bench_quality's kept EmbeddingGemma indexes serve too (their folders' layout is read):

    .venv/bin/python -m benchmarks.bench_fusion --scifact .cache/quality/scifact-gemma \
        --tldr .cache/quality/tldr-gemma --embed-model .models/embeddinggemma-300M-Q8_0.gguf

The target for each set is the one those benchmarks state: `query` >= max(search, vsearch).
docs/decisions/0045 and 0061 record the runs that chose the defaults (0061: one per embedder).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.bench_judged import DATA as TLDR_DATA
from benchmarks.bench_judged import MODEL
from benchmarks.bench_judged import ndcg_at_10 as binary_ndcg_at_10
from benchmarks.bench_scifact import COLLECTION as SCIFACT
from benchmarks.bench_scifact import doc_id_of, find_data, load_qrels, load_queries, ndcg_at
from benchmarks.harness import _base_env, machine
from domain.ports import Embedder

Scorer = Callable[[Any, str], list[Any]]


def variants(grid: str = "one-list", embedder: str | None = None) -> dict[str, Any]:
    """Label -> FillFusion (None: the fill rides in one keyword list at weight 2 with bonus).

    `grid`: "one-list" weighs the fill as part of one keyword list; "split" keeps the all-term
    and fill lists apart (ADR 0031's shape) over a grid of both lists' weights and offsets;
    "all" runs both. "default" is the default surface's weighting for `embedder`
    (docs/decisions/0061)."""
    from domain.profiles import SEED_000, FillFusion

    table: dict[str, Any] = {
        "default": SEED_000.fill_fusion_for(embedder),
        "one keyword list 2.0 with bonus (before 0031)": None,
        "0031: all-term 1.5/+3, fill list 0.25/+10": FillFusion(0.25, 10, 1.5, 3),
    }
    if grid in ("one-list", "all"):
        for weight in (1.0, 1.5, 2.0, 2.5, 3.0, 3.5):
            for offset in (1, 3):
                label = f"one keyword list {weight}/+{offset}"
                table[label] = FillFusion(0.0, 0, weight, offset, merged=True)
    if grid in ("split", "all"):
        for strict_weight in (1.5, 2.0, 2.5, 3.0):
            for strict_offset in (0, 1, 3):
                for fill_weight in (0.0, 0.1, 0.25, 0.5, 0.75, 1.0):
                    # a weightless fill list only adds candidates: its offset changes nothing
                    for fill_offset in (10,) if fill_weight == 0 else (3, 10, 30):
                        label = (
                            f"all-term {strict_weight}/+{strict_offset}, "
                            f"fill list {fill_weight}/+{fill_offset}"
                        )
                        table[label] = FillFusion(
                            fill_weight, fill_offset, strict_weight, strict_offset
                        )
    return table


class RememberedQueryVectors:
    """The embedder, with each query's vector computed once: every weighting searches the same
    questions, and the vectors do not depend on the weighting (documents are never embedded
    here)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._vectors: dict[str, list[float]] = {}

    @property
    def model_name(self) -> str:
        return self._embedder.model_name

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            self._vectors.update(zip(missing, self._embedder.embed_queries(missing), strict=True))
        return [self._vectors[t] for t in texts]

    def embed_documents(self, items: Sequence[tuple[str, str]]) -> list[list[float]]:
        raise AssertionError("bench_fusion embeds no documents")

    def count_tokens(self, text: str) -> int:
        return self._embedder.count_tokens(text)


class JudgedSet:
    """A kept index, its questions with their judgements, how a ranked list of document names
    scores against one judgement, and how a result's path names its document."""

    def __init__(
        self,
        name: str,
        env: dict[str, str],
        collection: str,
        questions: list[tuple[str, Any]],
        score: Callable[[list[str], Any], float],
        doc: Callable[[str], str] = str,
    ) -> None:
        from adapters.bootstrap import build_app
        from domain.usecases.search import Searcher, SearchModels

        self.name, self.collection = name, collection
        self.questions, self.score, self.doc = questions, score, doc
        self.app = build_app(None, env)
        app = self.app
        embedder = app.models.embedder
        models = SearchModels(None if embedder is None else RememberedQueryVectors(embedder))
        self.searcher = Searcher(app.store, app.lexical, app.vectors, models)

    def run(self, mode: str, profile: Any) -> float:
        from domain.usecases.search import SearchRequest

        searcher = self.searcher.with_profile(profile)
        request = SearchRequest(
            limit=10, collections=[self.collection], rerank=False, expand=False, min_score=0
        )
        call: Scorer = {
            "search": lambda s, q: s.lex_search(q, request),
            "vsearch": lambda s, q: s.vector_search(q, request),
            "query": lambda s, q: s.hybrid_query(q, replace(request, candidate_limit=30)),
        }[mode]
        total = 0.0
        for text, judged in self.questions:
            ranked = list(
                dict.fromkeys(self.doc(r.document.meta.path) for r in call(searcher, text))
            )
            total += self.score(ranked, judged)
        return total / len(self.questions)


def _kept_env(folder: Path, model: Path) -> dict[str, str]:
    """The environment of a kept index: bench_quality's and bench_judged's layout (home/,
    cache/, config/ under the folder) or bench_scifact's --keep layout."""
    if (folder / "cache" / "qmd" / "index.sqlite").is_file():
        env = {
            "HOME": str(folder / "home"),
            "XDG_CACHE_HOME": str(folder / "cache"),
            "XDG_CONFIG_HOME": str(folder / "config"),
            "QMD_OFFLINE": "1",
        }
    else:
        env = _base_env(folder / "ours" if (folder / "ours").is_dir() else folder)
    env["QMD_EMBED_MODEL"] = str(model)
    return env


def scifact_set(folder: Path, model: Path = MODEL) -> JudgedSet:
    env = _kept_env(folder, model)
    data = find_data(None)
    queries, qrels = load_queries(data), load_qrels(data)
    return JudgedSet(
        "SciFact",
        env,
        SCIFACT,
        [(queries[q], qrels[q]) for q in qrels],
        lambda ranked, relevant: ndcg_at(ranked, relevant, 10),
        doc_id_of,
    )


def tldr_set(root: Path, model: Path = MODEL) -> JudgedSet:
    env = _kept_env(root, model)
    fixture = json.loads((TLDR_DATA / "judged.json").read_text(encoding="utf-8"))
    questions = [(q["query"], set(q["expected_files"])) for q in fixture["queries"]]
    return JudgedSet("tldr", env, "tldr", questions, binary_ndcg_at_10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--scifact", type=Path, help="bench_scifact --keep folder")
    parser.add_argument("--tldr", type=Path, help="bench_judged --workdir folder")
    parser.add_argument(
        "--embed-model",
        type=Path,
        default=MODEL,
        help="the GGUF both kept indexes were embedded with (default: the MiniLM stand-in); "
        "e.g. .models/embeddinggemma-300M-Q8_0.gguf with bench_quality's kept "
        ".cache/quality/scifact-gemma and .cache/quality/tldr-gemma",
    )
    parser.add_argument(
        "--grid",
        choices=("one-list", "split", "all"),
        default="one-list",
        help="which weightings besides the default and ADR 0031's: the fill in one keyword "
        "list (one-list), all-term and fill lists apart (split), or both",
    )
    parser.add_argument(
        "--match",
        type=re.compile,
        help="only the weightings whose label this regular expression finds (the default "
        "weighting always runs)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.scifact is None and args.tldr is None:
        parser.error("name --scifact, --tldr or both")
    if args.tldr is not None and not (args.tldr / "cache" / "qmd" / "index.sqlite").is_file():
        parser.error(f"{args.tldr}: no kept index (run bench_judged --workdir {args.tldr})")
    from domain.profiles import SEED_000

    print(f"machine: {machine()}; embedder {args.embed_model.name}", file=sys.stderr)
    sets = []
    if args.scifact is not None:
        sets.append(scifact_set(args.scifact, args.embed_model))
    if args.tldr is not None:
        sets.append(tldr_set(args.tldr, args.embed_model))
    figures: dict[str, dict[str, float]] = {}
    for judged in sets:
        figures[judged.name] = {m: judged.run(m, SEED_000) for m in ("search", "vsearch")}
    targets = {name: max(f.values()) for name, f in figures.items()}
    header = " | ".join(f"{s.name} (target {targets[s.name]:.4f})" for s in sets)
    print(f"| weighting of the keyword side | {header} | worse margin |")
    print("|---|" + "---:|" * (len(sets) + 1))
    for label, fill in variants(args.grid, str(args.embed_model)).items():
        if args.match is not None and label != "default" and not args.match.search(label):
            continue
        started = time.perf_counter()
        # this weighting whatever the embedder (the per-embedder table would override it)
        profile = replace(SEED_000, fill_fusion=fill, fusion_by_embedder=())
        scores = {s.name: s.run("query", profile) for s in sets}
        for name, value in scores.items():
            figures[name][label] = value
        margin = min(scores[n] - targets[n] for n in scores)
        cells = " | ".join(f"{scores[s.name]:.4f}" for s in sets)
        print(f"| {label} | {cells} | {margin:+.4f} |", flush=True)
        print(f"  ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    for judged in sets:
        judged.app.close()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
