"""The judged Chinese/Japanese set (fixtures/cjk-trpl, benchmarks/bench_cjk_judged.py) stays
whole: every judged passage exists, every question has one, and the licence travels with it."""

from __future__ import annotations

import json

from tests.mcp_harness import REPO

SET = REPO / "fixtures" / "cjk-trpl"


def test_every_judgement_names_a_passage_of_the_set() -> None:
    judged = json.loads((SET / "judged.json").read_text(encoding="utf-8"))
    passages = {p.name for p in (SET / "passages").glob("*.md")}
    assert len(passages) == 125 and len(judged["queries"]) == 27
    for question in judged["queries"]:
        assert question["expected_files"], question["id"]
        assert set(question["expected_files"]) <= passages, question["id"]
    assert "MIT License" in (SET / "LICENSE").read_text(encoding="utf-8")
