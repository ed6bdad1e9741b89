"""Word recall of the office extractors against docling's published ground truth.

    .venv/bin/python -m benchmarks.bench_extract_recall

For each DOCX, PPTX and XLSX file under fixtures/docling/ (copied from docling's tests/data,
MIT licence beside them), the share of the words of docling's ground-truth markdown
(`<file>.md`) that our extraction also gives, counted with multiplicity: a word the truth
has three times must appear three times. Words are runs of letters, digits and `_`, lower
case, after HTML entities are decoded and `<!-- image -->` comments dropped (markup of the
truth file, not words of the document). Prints each file's recall, then the mean and the
minimum; exits 1 below the targets (mean 97 %, no file under 90 %).
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from collections import Counter
from pathlib import Path

from adapters.extract.formats import extract_file
from domain.extraction import Extracted

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "docling"
MEAN_TARGET = 0.97
MIN_TARGET = 0.90
_WORD = re.compile(r"\w+")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def words(text: str) -> Counter[str]:
    text = _COMMENT.sub(" ", html.unescape(text))
    return Counter(w.lower() for w in _WORD.findall(text))


def recall(truth: Counter[str], ours: Counter[str]) -> float:
    total = sum(truth.values())
    found = sum(min(count, ours[word]) for word, count in truth.items())
    return found / total if total else 1.0


def measure(root: Path) -> list[tuple[str, float, list[str]]]:
    rows = []
    for source in sorted(p for p in root.glob("*/*") if p.suffix in (".docx", ".pptx", ".xlsx")):
        truth = words(source.with_name(source.name + ".md").read_text(encoding="utf-8"))
        outcome = extract_file(str(source), source.suffix[1:])
        ours = words(outcome.text) if isinstance(outcome, Extracted) else Counter()
        missing = sorted(w for w, c in truth.items() if ours[w] < c)
        rows.append((f"{source.parent.name}/{source.name}", recall(truth, ours), missing))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    rows = measure(args.root)
    if not rows:
        print(f"no files under {args.root}")
        return 1
    for name, value, missing in rows:
        shown = " ".join(missing[:8]) + (" …" if len(missing) > 8 else "")
        print(f"{value * 100:6.1f} %  {name}" + (f"   missing: {shown}" if missing else ""))
    mean = sum(v for _, v, _ in rows) / len(rows)
    lowest = min(rows, key=lambda r: r[1])
    print(
        f"\n{len(rows)} files: mean {mean * 100:.1f} %, min {lowest[1] * 100:.1f} % "
        f"({lowest[0]}); targets mean >= {MEAN_TARGET:.0%}, min >= {MIN_TARGET:.0%}"
    )
    return 0 if mean >= MEAN_TARGET and lowest[1] >= MIN_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
