"""Seed 004's memory use cases over the fakes (REQ-MEM-*)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from domain.errors import INVALID_ARGUMENT, MODEL_UNAVAILABLE, QmdError
from domain.memory import KNOWLEDGE, MAX_ANSWER_CHARS, QA, MergeGroup, parse_record, render_record
from domain.ports import Fusion
from domain.usecases.memorize import Memorizer, Thresholds
from tests.fakes import FixedClock, InMemoryMemoryStore
from tests.model_fakes import FakeEmbedder


class Fuser:
    def __init__(self, answers: list[str | None]) -> None:
        self.answers = answers
        self.prompts: list[str] = []

    def fuse(self, group: MergeGroup, prompt: str) -> Fusion:
        self.prompts.append(prompt)
        text = self.answers.pop(0)
        return Fusion(text, "" if text else "refused")


def memory(store: InMemoryMemoryStore | None = None) -> tuple[Memorizer, InMemoryMemoryStore]:
    store = store or InMemoryMemoryStore()
    return Memorizer(store, FakeEmbedder(), FixedClock(), Thresholds(0.5, 0.5)), store


def test_inputs_are_checked_with_stable_codes() -> None:
    m, store = memory()
    for question, answer, topic in (("", "a", "t"), ("q", "   ", "t"), ("q", "a", "")):
        with pytest.raises(QmdError) as caught:
            m.store_qa(question, answer, topic)
        assert caught.value.code == INVALID_ARGUMENT
    with pytest.raises(QmdError) as caught:
        m.store_qa("q", "x" * (MAX_ANSWER_CHARS + 1), "t")
    assert caught.value.code == INVALID_ARGUMENT and str(MAX_ANSWER_CHARS) in caught.value.message
    for threshold in (-0.1, 1.5, float("nan")):
        with pytest.raises(QmdError) as caught:
            m.plan_merge(None, threshold)
        assert caught.value.code == INVALID_ARGUMENT
    assert store.files == {}


def test_no_embedding_model_is_model_unavailable_at_once() -> None:
    store = InMemoryMemoryStore()
    m = Memorizer(store, None, FixedClock())
    for call in (
        lambda: m.store_qa("q", "a", "t"),
        lambda: m.query_qa("q", "c"),
        lambda: m.plan_merge(None, None),
    ):
        with pytest.raises(QmdError) as caught:
            call()
        assert caught.value.code == MODEL_UNAVAILABLE
    assert store.files == {}


def test_topics_are_reused_by_similarity_and_pairs_are_idempotent() -> None:
    m, store = memory()
    first = m.store_qa("how to install pip packages", "pip install", "python packaging tools")
    second = m.store_qa("how to install pip packages quickly", "pip install -q", "python packaging")
    other = m.store_qa("boil eggs", "nine minutes", "cooking")
    assert first.created and not first.topic.reused
    assert second.topic.reused and second.record.topic == "python packaging tools"
    assert not other.topic.reused and other.record.topic == "cooking"
    assert [s.record.id for s in second.suggestion] == [first.record.id]
    again = m.store_qa("how to install  pip packages", "pip install", "cooking")
    assert not again.created and again.record.id == first.record.id
    assert len(store.files) == 3 and {t.name for t in store.topics()} == {
        "python packaging tools",
        "cooking",
    }


def test_query_picks_the_topic_from_the_context_without_fallback() -> None:
    m, _ = memory()
    stored = m.store_qa("how to install pip packages", "pip install", "python packaging")
    found = m.query_qa("install pip packages", "python packaging")
    assert found.topic == "python packaging" and [a.record.id for a in found.answers] == [
        stored.record.id
    ]
    nothing = m.query_qa("install pip packages", "medieval history")
    assert nothing.topic is None and nothing.answers == []


def test_merge_fuses_groups_and_hides_the_sources() -> None:
    m, store = memory()
    a = m.store_qa("how to install pip packages", "pip install", "python packaging").record
    b = m.store_qa("how to install pip packages fast", "pip install -q", "python packaging").record
    fuser = Fuser(["use pip install"])
    report = m.merge("python packaging", None, fuser)
    (knowledge,) = report.merged
    assert knowledge.kind == KNOWLEDGE and set(knowledge.sources) == {a.id, b.id}
    assert a.question in fuser.prompts[0] and b.text in fuser.prompts[0]
    assert m.query_qa("install pip packages", "python packaging").answers == []
    topic, hits = m.knowledge("python packaging", "pip")
    assert topic == "python packaging" and [h.record.text for h in hits] == ["use pip install"]
    assert all(store.get(i).merged for i in (a.id, b.id))  # type: ignore[union-attr]


def test_a_refused_fusion_changes_nothing() -> None:
    m, store = memory()
    m.store_qa("how to install pip packages", "pip install", "python packaging")
    m.store_qa("how to install pip packages fast", "pip install -q", "python packaging")
    before = dict(store.files)
    report = m.merge(None, None, Fuser([None]))
    assert report.merged == [] and len(report.skipped) == 1
    assert store.files == before


def test_repair_finishes_or_undoes_interrupted_merges_and_reembeds_edits() -> None:
    m, store = memory()
    a = m.store_qa("how to install pip packages", "pip install", "python packaging").record
    b = m.store_qa("how to install pip packages fast", "pip install -q", "python packaging").record
    c = m.store_qa("boil eggs", "nine minutes", "cooking").record
    m.merge("python packaging", None, Fuser(["use pip install"]))
    # a crash after the knowledge file but before b's mark: b's file still says unmerged
    b_path = next(p for p in store.files if b.id in p)
    store.files[b_path] = render_record(replace(b, merged=False))
    # a merge mark whose knowledge file never made it
    c_path = next(p for p in store.files if c.id in p)
    store.files[c_path] = render_record(replace(c, merged=True, merged_into="kn-gone"))
    # a hand edit of an answer
    a_text = next(p for p in store.files if a.id in p)
    store.files[a_text] = store.files[a_text].replace("pip install", "python -m pip install")
    fresh = Memorizer(store, FakeEmbedder(), FixedClock(), Thresholds(0.5, 0.5))
    assert fresh.repair() == 3
    b_now = parse_record(store.files[b_path])
    assert b_now is not None and b_now.merged and b_now.merged_into.startswith("kn-")
    c_now = parse_record(store.files[c_path])
    assert c_now is not None and not c_now.merged and c_now.merged_into == ""
    assert store.get(a.id).text == "python -m pip install"  # type: ignore[union-attr]
    assert store.get(a.id).vector  # type: ignore[union-attr]
    assert fresh.repair() == 0  # nothing left to do
    assert {r.kind for r in store.records()} == {QA, KNOWLEDGE}


def test_nul_and_lone_surrogates_are_refused_with_a_stable_code() -> None:
    """REQ-MEM-STORE-007: they cannot live in a UTF-8 markdown file; nothing is written."""
    m, store = memory()
    for bad in ("a\x00b", "a\ud800b"):
        for question, answer, topic in ((bad, "a", "t"), ("q", bad, "t"), ("q", "a", bad)):
            with pytest.raises(QmdError) as caught:
                m.store_qa(question, answer, topic)
            assert caught.value.code == INVALID_ARGUMENT
        with pytest.raises(QmdError) as caught:
            m.query_qa(bad, "context")
        assert caught.value.code == INVALID_ARGUMENT
    assert store.files == {}


def test_separators_inside_a_question_survive_the_file() -> None:
    """Issue 22 finding 8: U+2028, U+2029 and U+0085 are no line ends in front matter."""
    m, store = memory()
    question = "Why\u2028does\u2029this\u0085work?"
    stored = m.store_qa(question, "Because\u2028.", "topic\u2029one")
    (text,) = store.files.values()
    parsed = parse_record(text)
    assert parsed is not None
    assert (parsed.question, parsed.text, parsed.topic) == (
        question,
        "Because\u2028.",
        "topic\u2029one",
    )
    assert stored.record.question == question
