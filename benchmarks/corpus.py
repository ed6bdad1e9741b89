"""Deterministic synthetic markdown corpus for the speed benchmark.

Every file is built from one seeded `random.Random`, so the same `--docs` and `--seed` always
give byte-identical files (and therefore identical docids in both implementations).

Word choice follows a Zipf-like law (weight of rank r is 1 / r**1.05) over a fixed vocabulary:
a short head of English function words, then a few thousand pronounceable pseudo-words built
from a syllable table. That gives BM25 a realistic spread of document frequencies: the head
words occur everywhere, the middle ranks in some documents, the tail in a handful.

Documents are about 2.2 KB (1.5 to 2.5 KB, plus the section that crosses the target): a `#`
title, `##` sections of paragraphs, sometimes a bullet list or a fenced code block, in folders
one to three levels deep.

    python -m benchmarks.corpus OUT_DIR --docs 5000 --seed 42
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_DOCS = 5000
DEFAULT_SEED = 42
VOCABULARY_SIZE = 4000
ZIPF_EXPONENT = 1.05

FUNCTION_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "from",
    "at",
    "or",
    "an",
    "which",
    "have",
    "not",
    "but",
    "can",
    "all",
    "has",
    "were",
    "more",
    "one",
    "their",
    "also",
    "when",
    "there",
    "been",
    "its",
    "into",
    "other",
    "these",
    "such",
    "then",
    "than",
    "some",
    "may",
    "only",
    "most",
    "each",
    "both",
    "over",
    "under",
    "between",
    "after",
    "before",
    "while",
]
# Words the lex parsers treat specially, never generated as pseudo-words.
RESERVED = {"and", "or", "not", "near", "to"}
ONSETS = [
    "b",
    "c",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "cr",
    "dr",
    "fl",
    "gr",
    "kl",
    "pl",
    "pr",
    "st",
    "tr",
    "ch",
    "sh",
    "th",
]
NUCLEI = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
CODAS = ["", "", "", "n", "r", "s", "l", "m", "x", "nd", "rt", "st"]
AREAS = [
    "engineering",
    "research",
    "operations",
    "design",
    "finance",
    "support",
    "platform",
    "archive",
]
TOPICS = ["notes", "guides", "reports", "meetings", "specs", "drafts", "reviews", "logs"]
SUBTOPICS = ["alpha", "beta", "gamma", "delta", "epsilon"]
CODE_LANGS = ("python", "sh", "json", "sql")


def _pseudo_word(rng: random.Random) -> str:
    syllables = rng.choice((1, 2, 2, 2, 3))
    return "".join(
        rng.choice(ONSETS) + rng.choice(NUCLEI) + rng.choice(CODAS) for _ in range(syllables)
    )


def build_vocabulary(seed: int = DEFAULT_SEED, size: int = VOCABULARY_SIZE) -> list[str]:
    """Function words first (most frequent ranks), then unique pseudo-words."""
    rng = random.Random(f"vocabulary:{seed}")
    words = list(FUNCTION_WORDS)
    seen = set(words) | RESERVED
    while len(words) < size:
        word = _pseudo_word(rng)
        if word not in seen and 3 <= len(word) <= 12:
            seen.add(word)
            words.append(word)
    return words


@dataclass
class Corpus:
    """What was written: file paths (relative to the root), sizes and a query set."""

    root: Path
    files: list[str] = field(default_factory=list)
    total_bytes: int = 0
    queries: list[str] = field(default_factory=list)


class _Writer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"corpus:{seed}")
        self.vocabulary = build_vocabulary(seed)
        weights = [1.0 / (rank**ZIPF_EXPONENT) for rank in range(1, len(self.vocabulary) + 1)]
        self.cumulative = list(itertools.accumulate(weights))

    def word_index(self) -> int:
        point = self.rng.random() * self.cumulative[-1]
        return min(bisect.bisect_left(self.cumulative, point), len(self.vocabulary) - 1)

    def words(self, count: int) -> list[int]:
        return [self.word_index() for _ in range(count)]

    def text(self, indexes: list[int]) -> str:
        return " ".join(self.vocabulary[i] for i in indexes)

    def sentence(self, used: list[int]) -> str:
        indexes = self.words(self.rng.randint(6, 16))
        used.extend(indexes)
        text = self.text(indexes)
        return text[0].upper() + text[1:] + "."

    def paragraph(self, used: list[int]) -> str:
        return " ".join(self.sentence(used) for _ in range(self.rng.randint(2, 5)))

    def heading(self, used: list[int], low: int, high: int) -> str:
        # headings lean on the less common words so titles carry signal for BM25
        indexes = [self.rng.randint(60, len(self.vocabulary) - 1) for _ in range(low)]
        indexes += self.words(high - low)
        used.extend(indexes)
        return self.text(indexes).title()

    def block(self, used: list[int]) -> str:
        roll = self.rng.random()
        if roll < 0.15:
            items = []
            for _ in range(self.rng.randint(3, 5)):
                indexes = self.words(self.rng.randint(3, 8))
                used.extend(indexes)
                items.append(f"- {self.text(indexes)}")
            return "\n".join(items)
        if roll < 0.25:
            lang = self.rng.choice(CODE_LANGS)
            names = [self.vocabulary[self.rng.randint(60, 600)] for _ in range(4)]
            body = "\n".join(
                f"{names[i % 4]}_{i} = {names[(i + 1) % 4]}({self.rng.randint(0, 999)})"
                for i in range(self.rng.randint(2, 5))
            )
            return f"```{lang}\n{body}\n```"
        return self.paragraph(used)

    def document(self, target: int) -> tuple[str, list[int]]:
        used: list[int] = []
        parts = [f"# {self.heading(used, 2, self.rng.randint(3, 6))}", ""]
        parts.append(self.paragraph(used))
        size = sum(len(p) + 1 for p in parts)
        while size < target:
            section = ["", f"## {self.heading(used, 1, self.rng.randint(2, 4))}", ""]
            for _ in range(self.rng.randint(1, 3)):
                section += [self.block(used), ""]
            parts += section[:-1]
            size += sum(len(p) + 1 for p in section[:-1])
        return "\n".join(parts) + "\n", used

    def location(self, number: int) -> str:
        depth = self.rng.choice((1, 2, 2, 3))
        folders = [self.rng.choice(AREAS), self.rng.choice(TOPICS), self.rng.choice(SUBTOPICS)]
        return "/".join([*folders[:depth], f"doc-{number:05d}.md"])


def _pick_query(rng: random.Random, vocabulary: list[str], used: list[int], terms: int) -> str:
    """`terms` distinct words of frequency rank 40 to 2,499 (mostly mid-frequency pseudo-words,
    now and then one of the last function words) from one document, so an AND query has a hit."""
    candidates = sorted({i for i in used if 40 <= i < 2500})
    if len(candidates) < terms:
        candidates = sorted({i for i in used if i >= len(FUNCTION_WORDS)})
    picked = rng.sample(candidates, min(terms, len(candidates)))
    return " ".join(vocabulary[i] for i in picked)


def generate(
    root: Path, docs: int = DEFAULT_DOCS, seed: int = DEFAULT_SEED, queries: int = 30
) -> Corpus:
    """Write `docs` markdown files under `root` and return them with `queries` lex queries.

    Queries: 40% one term, 40% two terms, 20% three terms, each drawn from a single generated
    document so that even a strict all-terms query matches at least one file.
    """
    writer = _Writer(seed)
    query_rng = random.Random(f"queries:{seed}")
    query_docs = set(query_rng.sample(range(docs), min(queries, docs)))
    term_counts = itertools.cycle((1, 2, 1, 2, 3))
    corpus = Corpus(root=root)
    root.mkdir(parents=True, exist_ok=True)
    for number in range(docs):
        target = writer.rng.randint(1500, 2500)
        text, used = writer.document(target)
        relative = writer.location(number)
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        corpus.files.append(relative)
        corpus.total_bytes += len(data)
        if number in query_docs:
            corpus.queries.append(
                _pick_query(query_rng, writer.vocabulary, used, next(term_counts))
            )
    return corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write the markdown files into")
    parser.add_argument("--docs", type=int, default=DEFAULT_DOCS)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    corpus = generate(args.out, args.docs, args.seed)
    print(
        f"wrote {len(corpus.files)} files, {corpus.total_bytes / 1e6:.1f} MB, "
        f"under {args.out}; sample queries: {corpus.queries[:5]}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
