"""Levenshtein suggestions for documents that were not found.

The answer is the original's (case-insensitive edit distance over UTF-16 code units, kept when
<= max_distance, nearest first, ties in path order); the work is bounded so that a miss over
10,000 paths takes milliseconds (benchmarks/bench_suggest.py):

1. a `NameIndex` keeps each path's lower-cased text and an inverted index of its bigrams, built
   once per set of paths and reused while the paths do not change;
2. lower bounds drop almost every path before any edit distance is computed: shared bigrams
   (counted through the inverted index) and the length difference;
3. the survivors get a banded edit distance that stops as soon as every cell of a row exceeds
   the bound, after stripping the common prefix and suffix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def _utf16_units(text: str) -> list[int]:
    # The original compares JavaScript strings, i.e. UTF-16 code units.
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def _units(text: str) -> str:
    """The text as one character per UTF-16 code unit: itself when it has no character beyond
    the BMP (the usual case), else with such characters split into their surrogate pairs."""
    if text.isascii() or all(ord(c) < 0x10000 for c in text):
        return text
    return "".join(chr(unit) for unit in _utf16_units(text))


def levenshtein(a: str, b: str) -> int:
    """Classic edit distance (insert, delete, substitute cost 1) over UTF-16 code units."""
    left, right = _utf16_units(a), _utf16_units(b)
    if not left:
        return len(right)
    if not right:
        return len(left)
    previous = list(range(len(right) + 1))
    for i, unit in enumerate(left, start=1):
        current = [i]
        for j, other in enumerate(right, start=1):
            cost = 0 if unit == other else 1
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost))
        previous = current
    return previous[-1]


def bounded_levenshtein(left: str, right: str, bound: int) -> int | None:
    """The edit distance when it is <= `bound`, else None (computed only in the diagonal band
    of width 2 * bound + 1, stopping once a whole row exceeds the bound)."""
    start = 0
    while start < len(left) and start < len(right) and left[start] == right[start]:
        start += 1
    end_left, end_right = len(left), len(right)
    while end_left > start and end_right > start and left[end_left - 1] == right[end_right - 1]:
        end_left -= 1
        end_right -= 1
    a, b = left[start:end_left], right[start:end_right]
    if abs(len(a) - len(b)) > bound:
        return None
    if not a or not b:
        return max(len(a), len(b))
    big = bound + 1
    previous = [j if j <= bound else big for j in range(len(b) + 1)]
    for i in range(1, len(a) + 1):
        low, high = max(1, i - bound), min(len(b), i + bound)
        current = [big] * (len(b) + 1)
        current[0] = i if i <= bound else big
        unit = a[i - 1]
        best = current[0]
        for j in range(low, high + 1):
            value = previous[j - 1] + (0 if unit == b[j - 1] else 1)
            if previous[j] + 1 < value:
                value = previous[j] + 1
            if current[j - 1] + 1 < value:
                value = current[j - 1] + 1
            current[j] = value if value <= bound else big
            if current[j] < best:
                best = current[j]
        if best > bound:
            return None
        previous = current
    distance = previous[len(b)]
    return distance if distance <= bound else None


def _bigrams(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)}


def _within_bigram_bound(grams: set[str], wanted: set[str], bound: int) -> bool:
    return len(grams - wanted) <= 2 * bound and len(wanted - grams) <= 2 * bound


class NameIndex:
    """The paths a miss is compared with, prepared once (see the module docstring): their
    lower-cased UTF-16 text, and an inverted index from each two-character piece (bigram) to
    the paths that contain it.

    Bounds, for an edit distance of at most k: the lengths differ by at most k; and since one
    edit touches at most two bigram occurrences, at most 2k distinct bigrams of either string
    are missing from the other. Only the paths that pass both get an edit distance.
    """

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = tuple(paths)
        self._texts = [_units(path.lower()) for path in self.paths]
        self._uses = 0
        self._bigram_counts: list[int] = []
        self._postings: dict[str, list[int]] | None = None

    def _build_postings(self) -> dict[str, list[int]]:
        postings: dict[str, list[int]] = {}
        for number, text in enumerate(self._texts):
            grams = _bigrams(text)
            self._bigram_counts.append(len(grams))
            for gram in grams:
                postings.setdefault(gram, []).append(number)
        return postings

    def _candidates(self, wanted: str, bound: int) -> Iterable[int]:
        grams = _bigrams(wanted)
        need = len(grams) - 2 * bound
        lengths = range(len(wanted) - bound, len(wanted) + bound + 1)
        if need <= 0:
            # too short for the bigram bound to rule anything out
            return (n for n, text in enumerate(self._texts) if len(text) in lengths)
        self._uses += 1
        if self._postings is None and self._uses < 2:
            # a one-off miss (`qmd get` in a fresh process): a scan is cheaper than the index
            return (
                n
                for n, text in enumerate(self._texts)
                if len(text) in lengths and _within_bigram_bound(_bigrams(text), grams, bound)
            )
        if self._postings is None:
            self._postings = self._build_postings()  # a second miss: a server; index once
        shared: Counter[int] = Counter()
        for gram in grams:
            shared.update(self._postings.get(gram, ()))
        return sorted(
            number
            for number, count in shared.items()
            if count >= need and self._bigram_counts[number] - count <= 2 * bound
        )

    def similar(self, query: str, max_distance: int, limit: int) -> list[str]:
        """Paths within `max_distance` of `query`, nearest first, stable for ties."""
        wanted = _units(query.lower())
        scored: list[tuple[int, str]] = []
        for number in self._candidates(wanted, max_distance):
            text = self._texts[number]
            if abs(len(text) - len(wanted)) > max_distance:
                continue
            distance = bounded_levenshtein(text, wanted, max_distance)
            if distance is not None:
                scored.append((distance, self.paths[number]))
        scored.sort(key=lambda item: item[0])  # stable, like Array.prototype.sort
        return [path for _, path in scored[: max(0, limit)]]


def similar_paths(query: str, paths: Iterable[str], max_distance: int, limit: int) -> list[str]:
    """Case-insensitive distance; keep <= max_distance, nearest first, stable for ties."""
    return NameIndex(paths).similar(query, max_distance, limit)
