"""nDCG@10 of BM25 (`search`) and vectors (`vsearch`) on Chinese and Japanese questions.

    nice -n 10 .venv/bin/python -m benchmarks.bench_cjk_judged                 # EmbeddingGemma
    nice -n 10 .venv/bin/python -m benchmarks.bench_cjk_judged --model PATH.gguf     # another model

Corpus: `fixtures/cjk-trpl/passages`, 125 passages of the Chinese translation of The Rust
Programming Language (MIT; fixtures/cjk-trpl/SOURCE.md). Judgements: `judged.json`, 27
questions (25 Chinese, 2 Japanese) written for this project in plain words and judged by hand
against every passage. The passages are indexed and embedded by real `qmd` processes with the
model given (default: EmbeddingGemma-300M of the real set, `prepare_models.py --set real`);
the questions then run in-process through the default (seed 000) surface's use cases:
`search` (BM25 over CJK characters, any-term fill and the character-pair fallback of
REQ-SPEC-SEARCH-007), `search --strict` (the original's all-terms rule) and `vsearch` (no
expansion). Relevance is binary; nDCG@10 is averaged over questions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.bench_judged import ndcg_at_10, qmd

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "fixtures" / "cjk-trpl"
MODEL = REPO / ".models" / "embeddinggemma-300M-Q8_0.gguf"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--model", type=Path, default=MODEL, help="the embedding GGUF")
    parser.add_argument("--json", type=Path, help="write the figures here")
    options = parser.parse_args(argv)
    if not options.model.is_file():
        print(f"{options.model} is missing: run scripts/prepare_models.py --set real")
        return 2
    fixture = json.loads((DATA / "judged.json").read_text(encoding="utf-8"))
    questions = fixture["queries"]

    from adapters.bootstrap import build_app
    from domain.profiles import COMMAND_LINE_STRICT, SEED_000
    from domain.usecases.search import SearchRequest

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        passages = root / "passages"
        shutil.copytree(DATA / "passages", passages)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_"))},
            "HOME": str(root / "home"),
            "XDG_CACHE_HOME": str(root / "cache"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "QMD_EMBED_MODEL": str(options.model.resolve()),
            "QMD_OFFLINE": "1",
        }
        started = time.perf_counter()
        qmd(env, "collection", "add", str(passages), "--name", "trpl")
        indexed = time.perf_counter()
        qmd(env, "embed")
        embedded = time.perf_counter()
        print(f"CJK judged set: {len(questions)} questions; model {options.model.name}")
        print(f"  index {indexed - started:.1f} s, embed {embedded - indexed:.1f} s")
        print(f"  load average (1 min): {os.getloadavg()[0]:.2f}")

        app = build_app(None, env)
        seed = app.searcher.with_profile(SEED_000)
        strict = app.searcher.with_profile(COMMAND_LINE_STRICT)

        def files(results: Any) -> list[str]:
            return [r.document.meta.path for r in results]

        request = SearchRequest(limit=10, collections=["trpl"], rerank=False, expand=False)
        runs: dict[str, Any] = {
            "search (BM25)": lambda q: files(seed.lex_search(q, request)),
            "search --strict (original rule)": lambda q: files(strict.lex_search(q, request)),
            "vsearch": lambda q: files(seed.vector_search(q, replace(request, min_score=0.0))),
        }
        figures: dict[str, float] = {}
        for label, run in runs.items():
            scores = [ndcg_at_10(run(q["query"]), set(q["expected_files"])) for q in questions]
            figures[label] = sum(scores) / len(scores)
            print(f"  {label:<34} nDCG@10 {figures[label]:.3f}")
        app.close()
    verdict = "vsearch > BM25" if figures["vsearch"] > figures["search (BM25)"] else "NOT ABOVE"
    print(f"  {verdict}")
    if options.json:
        options.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
