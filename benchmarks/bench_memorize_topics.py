"""Does store_qa reuse the right topic? Precision and recall of "same topic" per threshold.

    nice -n 10 .venv/bin/python -m benchmarks.bench_memorize_topics
    nice -n 10 .venv/bin/python -m benchmarks.bench_memorize_topics --model PATH.gguf

The labelled set (benchmarks/data/memorize-topics/topics.json) holds topic names in groups of
paraphrases; two names are the same topic when they share a group. Every name is embedded with
the project's test embedding model (the MiniLM GGUF of scripts/prepare_models.py, the one the
tests use) through the same adapter and call the memory uses (`embed_queries`).

Two measures, for thresholds from 0.30 to 0.95:

* pairs: every pair of names; predicted "same" when their cosine similarity is at least the
  threshold. Precision = right "same" calls / all "same" calls; recall = right "same" calls /
  all same-group pairs.
* store: the names stored one after another in a shuffled order (5 seeds), each reusing the
  closest existing topic at or above the threshold (what `store_qa` does, domain/memory.py
  `closest_topic`) or creating a new one; then precision and recall of the resulting grouping
  over pairs, and how many topics it made (the labelled set has one per group).

The default threshold (domain/memory.py DEFAULT_TOPIC_THRESHOLD) is marked with `*`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
from pathlib import Path

from adapters.bootstrap import build_models
from domain.memory import DEFAULT_TOPIC_THRESHOLD, Topic, closest_topic, cosine

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "benchmarks" / "data" / "memorize-topics" / "topics.json"
MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"
THRESHOLDS = [round(0.30 + 0.05 * i, 2) for i in range(14)]
SEEDS = 5


def precision_recall(
    same_true: set[frozenset[str]], same_said: set[frozenset[str]]
) -> tuple[float, float]:
    right = len(same_true & same_said)
    precision = right / len(same_said) if same_said else 1.0
    recall = right / len(same_true) if same_true else 1.0
    return precision, recall


def simulate(
    names: list[str], vectors: dict[str, tuple[float, ...]], threshold: float, seed: int
) -> dict[str, str]:
    order = list(names)
    random.Random(seed).shuffle(order)
    topics: list[Topic] = []
    assigned: dict[str, str] = {}
    for name in order:
        best = closest_topic(vectors[name], topics)
        if best is not None and best[1] >= threshold:
            assigned[name] = best[0].name
        else:
            topics.append(Topic(name, vectors[name]))
            assigned[name] = name
    return assigned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(MODEL))
    args = parser.parse_args()
    groups: dict[str, list[str]] = json.loads(DATA.read_text(encoding="utf-8"))["groups"]
    label = {name: group for group, names in groups.items() for name in names}
    names = sorted(label)
    env = {**os.environ, "QMD_EMBED_MODEL": args.model, "QMD_OFFLINE": "1"}
    models = build_models(str(REPO / "no-config.yml"), env)
    assert models.embedder is not None
    vectors = {
        n: tuple(v) for n, v in zip(names, models.embedder.embed_queries(names), strict=True)
    }
    pairs = [frozenset(p) for p in itertools.combinations(names, 2)]
    same_true = {p for p in pairs if len({label[n] for n in p}) == 1}
    similarity = {p: cosine(*(vectors[n] for n in p)) for p in pairs}
    print(f"model: {Path(args.model).name}")
    print(f"labelled set: {len(names)} topic names in {len(groups)} groups, {len(pairs)} pairs,")
    print(f"  {len(same_true)} of them same-topic")
    print()
    print(
        f"threshold | pairs: precision recall | store: precision recall topics (of {len(groups)})"
    )
    for threshold in sorted({*THRESHOLDS, DEFAULT_TOPIC_THRESHOLD}):
        said = {p for p in pairs if similarity[p] >= threshold}
        p_pairs, r_pairs = precision_recall(same_true, said)
        stats = []
        for seed in range(SEEDS):
            assigned = simulate(names, vectors, threshold, seed)
            grouped = {p for p in pairs if len({assigned[n] for n in p}) == 1}
            stats.append((*precision_recall(same_true, grouped), len(set(assigned.values()))))
        p_store = sum(s[0] for s in stats) / SEEDS
        r_store = sum(s[1] for s in stats) / SEEDS
        topics = sum(s[2] for s in stats) / SEEDS
        mark = "*" if threshold == DEFAULT_TOPIC_THRESHOLD else " "
        print(
            f"{mark}{threshold:8.2f} |        {p_pairs:5.3f}  {r_pairs:5.3f} |"
            f"        {p_store:5.3f}  {r_store:5.3f}  {topics:5.1f}"
        )


if __name__ == "__main__":
    main()
