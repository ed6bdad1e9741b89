"""The embed ETA comes from measured throughput (domain/eta.py): on a simulated run whose
documents grow (so later chunks cost more time each), it stays within 25 % of the real
remaining time from the first 10 % of the work on, where counting documents (the rule the
progress bar used) is off by far more."""

from __future__ import annotations

import random
from dataclasses import dataclass

from domain.eta import ThroughputEta, format_eta

CHUNK_CHARS = 3000
BATCH_CHUNKS = 32


@dataclass(frozen=True)
class Point:
    elapsed: float  # seconds since the start
    done_chars: float
    done_docs: int


def simulated_run(
    seed: int, docs: int = 300, slowdown_from: float | None = None
) -> tuple[list[Point], float, float, int]:
    """Documents from 1,000 to 41,000 characters (growing), cut into chunks of at most 3,000;
    a chunk costs 50 ms plus 0.1 ms per character, each batch of 32 chunks ±20 % at random;
    with `slowdown_from`, every batch after that share of the work takes 1.5 times as long.
    Returns (a point after each batch, the run's length, total characters, documents)."""
    rng = random.Random(seed)
    sizes = [1000 + 40000 * (i / docs) ** 2 for i in range(docs)]
    chunks: list[tuple[int, float]] = []
    for number, size in enumerate(sizes):
        pieces = max(1, -int(-size // CHUNK_CHARS))
        chunks += [(number, size / pieces)] * pieces
    total = sum(sizes)
    elapsed = done = 0.0
    points: list[Point] = []
    for start in range(0, len(chunks), BATCH_CHUNKS):
        group = chunks[start : start + BATCH_CHUNKS]
        cost = sum(0.05 + 1e-4 * chars for _, chars in group) * rng.uniform(0.8, 1.2)
        if slowdown_from is not None and done > slowdown_from * total:
            cost *= 1.5
        elapsed += cost
        done += sum(chars for _, chars in group)
        last = group[-1][0]
        finished = (
            last + 1
            if start + BATCH_CHUNKS >= len(chunks) or chunks[start + BATCH_CHUNKS][0] != last
            else last
        )
        points.append(Point(elapsed, done, finished))
    return points, elapsed, total, docs


def _checked(points: list[Point], end: float, total: float) -> list[Point]:
    """From the first 10 % of the work until the last 5 % of the time (the last batch or two,
    whose ±20 % noise no estimate can know)."""
    return [p for p in points if p.done_chars >= 0.10 * total and end - p.elapsed >= 0.05 * end]


def test_the_estimate_is_within_a_quarter_of_the_real_remaining_time() -> None:
    for seed in range(5):
        points, end, total, _ = simulated_run(seed)
        eta = ThroughputEta(total)
        errors = []
        for point in points:
            eta.observe(point.done_chars, point.elapsed)
            if point in _checked(points, end, total):
                estimate = eta.remaining_s()
                assert estimate is not None
                real = end - point.elapsed
                errors.append(abs(estimate - real) / real)
        assert len(errors) > 20
        assert max(errors) <= 0.25, (seed, max(errors))


def test_counting_documents_misjudges_the_same_run() -> None:
    """The rule the progress bar used: remaining documents times the mean time per document.
    Late documents are the large ones, so it promises far too little."""
    points, end, total, docs = simulated_run(0)
    worst = 0.0
    for point in _checked(points, end, total):
        if point.done_docs:
            estimate = (docs - point.done_docs) * point.elapsed / point.done_docs
            worst = max(worst, abs(estimate - (end - point.elapsed)) / (end - point.elapsed))
    assert worst > 0.5


def test_a_lasting_slowdown_is_taken_in_within_a_few_half_lives() -> None:
    points, end, total, _ = simulated_run(1, slowdown_from=0.4)
    eta = ThroughputEta(total)
    slowed = next(p.elapsed for p in points if p.done_chars > 0.4 * total)
    for point in points:
        eta.observe(point.done_chars, point.elapsed)
        settled = point.elapsed > slowed + 4 * eta.half_life_s
        if settled and point in _checked(points, end, total):
            real = end - point.elapsed
            estimate = eta.remaining_s()
            assert estimate is not None and abs(estimate - real) <= 0.25 * real


def test_nothing_is_known_before_work_and_no_batch_can_make_the_rate_infinite() -> None:
    eta = ThroughputEta(1000)
    assert eta.remaining_s() is None
    eta.observe(0, 5.0)  # model loading: time, no work
    assert eta.remaining_s() is None
    eta.observe(100, 6.0)
    eta.observe(200, 6.0)  # a batch that took no measurable time
    assert eta.remaining_s() is not None and eta.remaining_s() > 0  # type: ignore[operator]
    eta.observe(1000, 8.0)
    assert eta.remaining_s() == 0.0


def test_format() -> None:
    assert format_eta(None) == "?"
    assert format_eta(42.4) == "0:42"
    assert format_eta(20 * 60 + 37) == "20:37"
    assert format_eta(3 * 3600 + 61) == "3:01:01"
