"""bench_quality's target lines: one per mode and question set, none repeated."""

from benchmarks.bench_quality import ModeFigures, targets


def _figures(name: str, search: float, vsearch: float, query: float) -> list[ModeFigures]:
    ids = ("q1", "q2")
    return [
        ModeFigures(f"{mode} [{name}]", dict.fromkeys(ids, value))
        for mode, value in (("search", search), ("vsearch", vsearch), ("query", query))
    ]


def test_a_sample_that_is_every_question_is_checked_once() -> None:
    lines = targets(_figures("gemma", 0.5, 0.7, 0.8), ["q1", "q2"], ["q1", "q2"])
    assert lines == ["query [gemma] over 2: 0.8000 >= max(search 0.5000, vsearch 0.7000) PASS"]


def test_a_smaller_sample_gets_its_own_line_and_a_shortfall_fails() -> None:
    lines = targets(_figures("stand-in", 0.5, 0.9, 0.8), ["q1", "q2"], ["q1"])
    assert lines == [
        "query [stand-in] over 2: 0.8000 >= max(search 0.5000, vsearch 0.9000) FAIL",
        "query [stand-in] over 1: 0.8000 >= max(search 0.5000, vsearch 0.9000) FAIL",
    ]
