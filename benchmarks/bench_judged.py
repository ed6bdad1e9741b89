"""nDCG@10 of `search`, `vsearch` and `query` on natural-language questions about real docs.

    .venv/bin/python -m benchmarks.bench_judged                  # about 3 to 6 minutes
    .venv/bin/python -m benchmarks.bench_judged --limit-docs 120 --questions 8   # smoke size
    .venv/bin/python -m benchmarks.bench_judged --models gemma --workdir DIR   # EmbeddingGemma

Corpus: `benchmarks/data/tldr-common/pages` (716 pages of tldr-pages, CC BY 4.0; see SOURCE.md).
Judgements: `benchmarks/data/tldr-common/judged.json`, 54 questions written for this project in
plain words (mostly without the command's name), each with the page(s) that answer it; it is
also a `qmd bench` fixture. The corpus is indexed and embedded by real `qmd` processes with the
MiniLM GGUF (`scripts/prepare_models.py`); the questions then run in-process through the
default (seed 000) surface's use cases: `search` (BM25, any-term fill), `vsearch` (vector, no
expansion) and `query` (fusion, no rerank: no expansion or rerank model is configured, as on a
machine with only an embedding model). Relevance is binary; nDCG@10 is averaged over questions.

`query` uses the default fusion (one keyword list, weight 2.5, no top-rank bonus:
docs/decisions/0045); `--variants` also measures the weightings docs/decisions/0031 compared.
`bench_fusion.py` runs the weightings on this set and SciFact together.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.harness import BenchError, load_average
from benchmarks.model_sets import MODEL_SETS, MODELS_DIR, parse_model_sets

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "benchmarks" / "data" / "tldr-common"
MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"  # the stand-in set's (bench_fusion)


def ndcg_at_10(ranked: list[str], relevant: set[str]) -> float:
    gains = sum(1 / math.log2(i + 2) for i, path in enumerate(ranked[:10]) if path in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return gains / ideal if ideal else 0.0


def qmd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("qmd")), *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"qmd {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--questions", type=int, default=0, help="use only the first N")
    parser.add_argument("--limit-docs", type=int, default=0, help="index only N pages (smoke)")
    parser.add_argument("--variants", action="store_true", help="also try fill weightings")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--workdir", type=Path, help="keep the index here and reuse it on the next run"
    )
    parser.add_argument(
        "--models",
        default="stand-in",
        choices=sorted(MODEL_SETS),
        help="the embedding model comes from this set (benchmarks/model_sets.py; expansion "
        "and reranking stay off here: benchmarks/bench_quality.py measures them)",
    )
    options = parser.parse_args(argv)
    try:
        (model_set,) = parse_model_sets(options.models)
    except BenchError as error:
        print(error, file=sys.stderr)
        return 2
    model = MODELS_DIR / model_set.embed
    fixture = json.loads((DATA / "judged.json").read_text(encoding="utf-8"))
    questions = fixture["queries"][: options.questions or None]

    from adapters.bootstrap import build_app
    from domain.profiles import SEED_000, FillFusion
    from domain.usecases.search import SearchRequest

    with tempfile.TemporaryDirectory() as scratch:
        root = options.workdir or Path(scratch)
        pages = root / "pages"
        reuse = (root / "cache" / "qmd" / "index.sqlite").is_file()
        if reuse:
            pass
        elif options.limit_docs:
            wanted = {f for q in questions for f in q["expected_files"]}
            names = sorted(p.name for p in (DATA / "pages").glob("*.md"))
            keep = sorted(wanted | set(names[: options.limit_docs]))
            pages.mkdir()
            for name in keep:
                shutil.copy(DATA / "pages" / name, pages / name)
        else:
            shutil.copytree(DATA / "pages", pages)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_"))},
            "HOME": str(root / "home"),
            "XDG_CACHE_HOME": str(root / "cache"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "QMD_EMBED_MODEL": str(model),
            "QMD_OFFLINE": "1",
        }
        started = time.perf_counter()
        if not reuse:
            qmd(env, "collection", "add", str(pages), "--name", "tldr")
        indexed = time.perf_counter()
        if not reuse:
            qmd(env, "embed")
        embedded = time.perf_counter()
        documents = len(list(pages.glob("*.md")))
        print(f"judged set: {len(questions)} questions, {documents} tldr pages")
        print(f"  index {indexed - started:.1f} s, embed ({model.name}) {embedded - indexed:.1f} s")

        app = build_app(None, env)
        seed = app.searcher.with_profile(SEED_000)

        def files(results: Any) -> list[str]:
            return [r.document.meta.path for r in results]

        request = SearchRequest(limit=10, collections=["tldr"], rerank=False, expand=False)
        runs: dict[str, Any] = {
            "search": lambda s, q: files(s.lex_search(q, request)),
            "vsearch": lambda s, q: files(s.vector_search(q, request)),
            "query": lambda s, q: files(s.hybrid_query(q, replace(request, candidate_limit=30))),
        }
        searchers = {"search": seed, "vsearch": seed, "query": seed}
        if options.variants:
            for label, fill in (
                ("query, fill in the keyword list (before)", None),
                ("query, 0031: keyword 1.5 no bonus, fill 0.25/11", FillFusion(0.25, 10, 1.5, 3)),
                ("query, fill list 0.25 from rank 11", FillFusion(0.25, 10)),
                ("query, no fill", FillFusion(0.0, 0)),
                ("query, keyword 2.0 no bonus, fill 0.25/11", FillFusion(0.25, 10, 2.0, 3)),
                ("query, keyword 1.0 no bonus, fill 0.25/11", FillFusion(0.25, 10, 1.0, 3)),
                ("query, keyword 1.5 no bonus, fill 0.1/11", FillFusion(0.1, 10, 1.5, 3)),
            ):
                profile = replace(SEED_000, fill_fusion=fill)
                runs[label] = runs["query"]
                searchers[label] = app.searcher.with_profile(profile)
        figures: dict[str, float] = {}
        for label, run in runs.items():
            scores = []
            for question in questions:
                ranked = run(searchers[label], question["query"])
                scores.append(ndcg_at_10(ranked, set(question["expected_files"])))
            figures[label] = sum(scores) / len(scores)
            print(f"  {label:<40} nDCG@10 {figures[label]:.3f}  (load {load_average():.1f})")
        app.close()
    best_single = max(figures["search"], figures["vsearch"])
    verdict = "hybrid >= max(search, vsearch)" if figures["query"] >= best_single else "BELOW"
    print(f"  {verdict}")
    if options.json:
        options.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
