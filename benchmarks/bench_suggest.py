"""How long does a mistyped `get` take to answer "did you mean", at 10,000 documents?

    .venv/bin/python -m benchmarks.bench_suggest                 # 10,000 documents
    .venv/bin/python -m benchmarks.bench_suggest --docs 500      # smoke size

A real SQLite index (in a temporary folder) gets `--docs` documents whose paths look like a
documentation tree (`area/topic/word-word.md`, words from the benchmark vocabulary), then
`Retrieval.find` (what `qmd get` and the MCP `get` tool call) is timed on misses:

* `relative`: a collection-relative path with one or two letters changed (the original's rule);
* `qualified`: the same as `collection/path` and `qmd://collection/path` (search results' spelling);
* `far`: a path close to nothing (every candidate must be ruled out).

It prints the median and p95 per kind, the first miss separately (what a one-off `qmd get` in a
fresh process pays: a scan, no index), and the time the unbounded full-matrix Levenshtein over
every path takes for the same misses, for comparison. The answers are the same
(tests/unit/test_suggest.py).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from adapters.sqlite.store import SqliteIndex
from benchmarks.corpus import AREAS, SUBTOPICS, TOPICS, build_vocabulary
from domain.errors import DocumentNotFoundError
from domain.suggest import levenshtein
from domain.usecases.retrieval import GET_SUGGESTION_DISTANCE, GET_SUGGESTION_LIMIT, Retrieval

T0 = "2026-01-01T00:00:00.000Z"


def paths_for(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = build_vocabulary(seed)[60:2000]
    seen: set[str] = set()
    while len(seen) < count:
        depth = rng.choice((1, 2, 2, 3))
        folders = [rng.choice(AREAS), rng.choice(TOPICS), rng.choice(SUBTOPICS)][:depth]
        name = "-".join(rng.sample(words, rng.choice((1, 2, 2, 3))))
        seen.add("/".join([*folders, f"{name}.md"]))
    return sorted(seen)


def typo(path: str, rng: random.Random) -> str:
    """One or two letters of the file name changed, dropped or doubled."""
    head, _, name = path.rpartition("/")
    stem = list(name[:-3])
    for _ in range(rng.choice((1, 2))):
        at = rng.randrange(len(stem))
        action = rng.choice(("swap", "drop", "double"))
        if action == "swap":
            stem[at] = rng.choice("abcdefghijklmnopqrstuvwxyz")
        elif action == "drop" and len(stem) > 2:
            del stem[at]
        else:
            stem.insert(at, stem[at])
    return f"{head}/{''.join(stem)}.md" if head else f"{''.join(stem)}.md"


def time_miss(retrieval: Retrieval, reference: str) -> tuple[float, int]:
    started = time.perf_counter()
    try:
        retrieval.find(reference, qualified=True)
    except DocumentNotFoundError as missed:
        return (time.perf_counter() - started) * 1000, len(missed.suggestions)
    raise SystemExit(f"{reference!r} was found; the benchmark needs misses")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--misses", type=int, default=40, help="misses timed per kind")
    parser.add_argument("--seed", type=int, default=42)
    options = parser.parse_args(argv)
    rng = random.Random(options.seed)
    paths = paths_for(options.docs, options.seed)
    with tempfile.TemporaryDirectory() as folder:
        index = SqliteIndex.open(Path(folder) / "index.sqlite", {})
        for number, path in enumerate(paths):
            body = f"# Document {number}\n\nbody {number}\n"
            index.upsert_document(
                "docs", path, f"Document {number}", f"{number:064x}", body, T0, T0
            )
        retrieval = Retrieval(index)
        samples = rng.sample(paths, options.misses)
        relative = [typo(p, rng) for p in samples]
        relative = [r for r in relative if r not in set(paths)]
        kinds = {
            "relative": relative,
            "qualified": [
                f"qmd://docs/{r}" if i % 2 else f"docs/{r}" for i, r in enumerate(relative)
            ],
            "far": [f"zz/qq/{'xy' * (6 + i % 5)}.md" for i in range(options.misses)],
        }
        first_ms, _ = time_miss(retrieval, relative[0])
        print(f"suggestions for a missed get: {len(paths):,} documents, SQLite index")
        print(f"  first miss (a one-off `qmd get`: scan, no index): {first_ms:.1f} ms")
        for kind, references in kinds.items():
            timings, found = [], 0
            for reference in references:
                elapsed, count = time_miss(retrieval, reference)
                timings.append(elapsed)
                found += count > 0
            p95 = statistics.quantiles(timings, n=20)[-1]
            print(
                f"  {kind:<10} median {statistics.median(timings):6.1f} ms   p95 {p95:6.1f} ms"
                f"   ({found}/{len(references)} with suggestions)"
            )
        started = time.perf_counter()
        for reference in relative[:5]:
            scored = [(levenshtein(p.lower(), reference.lower()), p) for p in paths]
            kept = sorted(
                (s for s in scored if s[0] <= GET_SUGGESTION_DISTANCE), key=lambda s: s[0]
            )
            kept[:GET_SUGGESTION_LIMIT]
        full = (time.perf_counter() - started) * 1000 / 5
        print(f"  for comparison, the full-matrix distance to every path: {full:6.0f} ms per miss")
        index.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
