"""SearchTrace: stage timings from the caller's clock, and each skipped stage said once."""

from __future__ import annotations

import itertools

from domain.usecases.trace import SearchTrace, traced


def test_stages_are_timed_and_reported_at_start_and_end() -> None:
    ticks = itertools.count(start=10.0, step=1.5)
    heard: list[tuple[str, float | None]] = []
    trace = SearchTrace(lambda: next(ticks), lambda stage, secs: heard.append((stage, secs)))
    with trace.stage("expanding"):
        pass
    with traced(trace, "reranking"):
        pass
    assert trace.stages == [("expanding", 1.5), ("reranking", 1.5)]
    assert heard == [
        ("expanding", None),
        ("expanding", 1.5),
        ("reranking", None),
        ("reranking", 1.5),
    ]
    with traced(None, "nothing"):  # no trace: the block still runs
        heard.append(("ran", None))
    assert heard[-1] == ("ran", None)


def test_a_stage_skipped_several_times_is_one_note() -> None:
    trace = SearchTrace()
    trace.degraded("rerank", "model missing")
    trace.degraded("rerank", "model missing again")
    trace.degraded("vectors", "no vector index")
    assert [d.stage for d in trace.degradations] == ["rerank", "vectors"]
    assert trace.degradations[0].note == (
        "rerank skipped (results are in fused order, not reranked): model missing"
    )
