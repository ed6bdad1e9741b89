"""Levenshtein suggestions for documents that were not found.

The answer is the original's (case-insensitive edit distance over UTF-16 code units, kept when
<= max_distance, nearest first, ties in the order the paths are given); the work is bounded so
that a miss costs milliseconds even where every path is close to every other
(`area3/topic7/doc1234.md`; benchmarks/bench_suggest.py):

1. a one-off miss (a fresh `qmd get` process) scans the paths once, in order; once `limit`
   answers are held, the edit distance bound shrinks to one less than the farthest of them;
2. from the second miss on (a server), a `NameIndex` keeps each path's bigrams as a bit mask;
   the masks' popcounts and the lengths give every path a lower bound on its distance in a few
   integer operations, and paths are visited by increasing bound, stopping once the bound
   exceeds the farthest answer held;
3. the survivors get a banded edit distance that stops as soon as every cell of a row exceeds
   the bound, after stripping the common prefix and suffix.

`near_names` is this project's own surfaces' rule (REQ-SPEC-GET-NAME-001): the same search run
a second time over each path's last segments, so a file name typed without its folders finds
the file; the compat surface keeps the original's answer.
"""

from __future__ import annotations

import bisect
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


class NameIndex:
    """The paths a miss is compared with, prepared once (see the module docstring): their
    lower-cased UTF-16 text and (from the second miss on) each one's set of two-character
    pieces (bigrams) as a bit mask, one bit per distinct bigram of all the paths.

    Lower bound used: one edit destroys at most two bigram occurrences of a string, so a path
    within k edits of the query lacks at most 2k of the query's distinct bigrams and has at
    most 2k the query lacks; and the lengths differ by at most k. Both counts are popcounts of
    two masks, so bounding every path costs a few integer operations, and only the paths whose
    bound could still beat the answers found so far get an edit distance, nearest bound first.
    """

    def __init__(self, paths: Iterable[str], compared: Iterable[str] | None = None) -> None:
        """`compared`: the text each path is compared by, in the same order (by default the
        path itself; a path's last segments when misses are compared by file name)."""
        self.paths = tuple(paths)
        texts = self.paths if compared is None else tuple(compared)
        if len(texts) != len(self.paths):
            raise ValueError("one compared text per path")
        self._texts = [_units(text.lower()) for text in texts]
        self._uses = 0
        self._bits: dict[str, int] | None = None  # bigram -> its bit
        self._masks: list[int] = []

    def _build_masks(self) -> dict[str, int]:
        bits: dict[str, int] = {}
        masks = self._masks
        for text in self._texts:
            grams = _bigrams(text)
            for gram in grams - bits.keys():
                bits[gram] = 1 << len(bits)
            masks.append(sum(map(bits.__getitem__, grams)))  # distinct bits: the sum is the OR
        return bits

    def similar(self, query: str, max_distance: int, limit: int) -> list[str]:
        """Paths within `max_distance` of `query`, nearest first, stable for ties."""
        return [self.paths[number] for _, number in self.scored(query, max_distance, limit)]

    def scored(self, query: str, max_distance: int, limit: int) -> list[tuple[int, int]]:
        """(distance, the path's position) of the paths `similar` answers, in its order."""
        if limit <= 0 or max_distance < 0:
            return []
        wanted = _units(query.lower())
        self._uses += 1
        if self._bits is None and self._uses < 2:
            # a one-off miss (`qmd get` in a fresh process): one pass, no masks to build
            return self._scan(wanted, max_distance, limit)
        if self._bits is None:
            self._bits = self._build_masks()  # a second miss: a server; masks once
        return self._bounded(wanted, max_distance, limit, self._bits)

    def _scan(self, wanted: str, max_distance: int, limit: int) -> list[tuple[int, int]]:
        """Every path once, in order, the bound shrinking as the `limit` nearest fill up:
        once they are full only a path nearer than the farthest of them can still enter (a
        tie loses to the earlier path)."""
        best: list[tuple[int, int]] = []  # (distance, number), sorted
        bound = max_distance
        size = len(wanted)
        for number, text in enumerate(self._texts):
            if abs(len(text) - size) > bound:
                continue
            distance = bounded_levenshtein(text, wanted, bound)
            if distance is None:
                continue
            bisect.insort(best, (distance, number))
            if len(best) > limit:
                best.pop()
            if len(best) == limit:
                bound = best[-1][0] - 1
                if bound < 0:
                    break
        return best

    def _bounded(
        self, wanted: str, max_distance: int, limit: int, bits: dict[str, int]
    ) -> list[tuple[int, int]]:
        """Paths grouped by their lower bound, visited nearest bound first; stops when the
        bound exceeds the farthest of the `limit` answers found."""
        grams = _bigrams(wanted)
        query_mask = 0
        for gram in grams:
            query_mask |= bits.get(gram, 0)  # a bigram no path has: every path lacks it
        size = len(wanted)
        reach = 2 * max_distance
        buckets: list[list[int]] = [[] for _ in range(max_distance + 1)]
        for number, mask in enumerate(self._masks):
            lacking = len(grams) - (mask & query_mask).bit_count()
            if lacking > reach:
                continue
            extra = (mask & ~query_mask).bit_count()
            if extra > reach:
                continue
            low = max((lacking + 1) // 2, (extra + 1) // 2, abs(len(self._texts[number]) - size))
            if low <= max_distance:
                buckets[low].append(number)
        best: list[tuple[int, int]] = []  # (distance, number), sorted
        bound = max_distance
        for low, bucket in enumerate(buckets):
            if low > bound:
                break
            for number in bucket:
                distance = bounded_levenshtein(self._texts[number], wanted, bound)
                if distance is None:
                    continue
                bisect.insort(best, (distance, number))
                if len(best) > limit:
                    best.pop()
                if len(best) == limit:
                    bound = best[-1][0]  # a tie may still win: by its earlier place
        return best


def similar_paths(query: str, paths: Iterable[str], max_distance: int, limit: int) -> list[str]:
    """Case-insensitive distance; keep <= max_distance, nearest first, stable for ties."""
    return NameIndex(paths).similar(query, max_distance, limit)


def _stem_extends(query_name: str, name: str) -> bool:
    """Whether one file name's stem continues the other's (`v18.0` and `v18.0.0`, `notes` and
    `notes-2024`): a person who typed the shorter one most likely means the longer."""
    dot = name.rfind(".")
    stem, extension = (name[:dot], name[dot:]) if dot > 0 else (name, "")
    wanted = (
        query_name[: -len(extension)]
        if extension and query_name.endswith(extension)
        else query_name
    )
    return bool(wanted) and bool(stem) and (stem.startswith(wanted) or wanted.startswith(stem))


def tail(path: str, segments: int) -> str:
    """The last `segments` `/`-separated segments of `path` (all of it when it has fewer)."""
    return "/".join(path.split("/")[-segments:])


def near_names(
    query: str, whole: NameIndex, tails: NameIndex | None, max_distance: int, limit: int
) -> list[str]:
    """Paths near `query` as a person means it (REQ-SPEC-GET-NAME-001): each path's distance
    is the smaller of the original's (the whole path) and that of its last segments, as many
    as the query has, to the query (`tails`, None when the query has as many segments as any
    path), counted only within a third of the query's length (at least 1); so `v18.0.md`
    finds `release/v18.0.0.md`. Within `max_distance`, nearest first; among equally near
    paths, one whose file name continues the query's (`v18.0` -> `v18.0.0`) first, then in
    the paths' order. `whole` and `tails` list the same paths in the same order."""
    if limit <= 0 or max_distance < 0:
        return []
    pool = limit * 2  # equally near paths beyond `limit`, for the tie-break to choose from
    best: dict[int, int] = {}
    for distance, number in whole.scored(query, max_distance, pool):
        best[number] = distance
    if tails is not None:
        wanted = tail(query, query.count("/") + 1)
        # a third of what was typed: five edits make any two short names alike
        reach = min(max_distance, max(1, len(wanted) // 3))
        for distance, number in tails.scored(wanted, reach, pool):
            best[number] = min(distance, best.get(number, distance))
    name = query.rsplit("/", 1)[-1].lower()

    def rank(number: int) -> tuple[int, bool, int]:
        path_name = whole.paths[number].rsplit("/", 1)[-1].lower()
        return best[number], not _stem_extends(name, path_name), number

    return [whole.paths[number] for number in sorted(best, key=rank)[:limit]]
