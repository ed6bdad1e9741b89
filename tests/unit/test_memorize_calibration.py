"""Thresholds per embedding model and per script (REQ-MEM-CAL-*), over the fakes: which
calibration a model gets, the script classes, and a refused threshold that similarity alone
can never pass (the fake embedder gives identical texts a similarity of 1.0)."""

from __future__ import annotations

import pytest

from domain.memory import (
    CALIBRATIONS,
    FALLBACK_CALIBRATION,
    LATIN,
    OTHER,
    QA,
    Calibration,
    MemoryRecord,
    calibration_for,
    script_of,
    similar_groups,
)
from domain.usecases.memorize import Memorizer, Thresholds
from tests.fakes import FixedClock, InMemoryMemoryStore
from tests.model_fakes import FakeEmbedder

MINILM = "all-MiniLM-L6-v2-f16.gguf"
GEMMA = "embeddinggemma-300M-Q8_0.gguf"
# Latin text at 0.5; other scripts refused, as for a model that cannot separate them.
LATIN_ONLY = Calibration("fake-embed", "", 0.5, 0.5, None, None)
# Every script at 0.5, as for a model measured to separate Chinese and Japanese.
MULTILINGUAL = Calibration("fake-embed", "", 0.5, 0.5, 0.5, 0.5, multilingual=True)


def test_a_model_gets_the_calibration_measured_for_its_file() -> None:
    for reference in (MINILM, f"/models/{MINILM}", f"hf:org/repo/{MINILM}", MINILM.upper()):
        assert calibration_for(reference).model == MINILM
    assert all(len(c.sha256) == 64 for c in CALIBRATIONS)
    for unknown in ("", "hf:ggml-org/embeddinggemma-300M-GGUF/x.gguf", "MiniLM.gguf"):
        assert calibration_for(unknown) is FALLBACK_CALIBRATION
    assert (FALLBACK_CALIBRATION.topic, FALLBACK_CALIBRATION.fusion) == (0.90, 0.90)
    assert FALLBACK_CALIBRATION.topic_other == FALLBACK_CALIBRATION.fusion_other == 0.95


def test_the_bundled_model_refuses_cjk_and_keeps_english() -> None:
    minilm = calibration_for(MINILM)
    assert (minilm.topic_for("python packaging"), minilm.fusion_for("What?", "Why?")) == (
        0.45,
        0.60,
    )
    assert minilm.topic_for("烹饪", "Python打包") is None
    assert minilm.fusion_for("How do I cook rice?", "煮米饭要放多少水？") is None


def test_embedding_gemma_is_declared_multilingual_and_reuses_cjk_by_similarity() -> None:
    gemma = calibration_for(f"/models/{GEMMA}")
    assert gemma.model == GEMMA and gemma.multilingual is True
    assert gemma.topic_for("Python 打包", "Python打包") == 0.60
    assert gemma.fusion_for("怎么把包上传到 PyPI？", "发布一个 Python 库需要哪些步骤？") == 0.60
    assert (gemma.topic_for("python packaging"), gemma.fusion_for("What?", "Why?")) == (0.55, 0.65)
    assert calibration_for(MINILM).multilingual is False


def test_other_script_thresholds_need_a_multilingual_model() -> None:
    """The table cannot say two things: a model not declared multilingual refuses other
    scripts, so giving it thresholds for them is an error, not a silent switch."""
    with pytest.raises(ValueError, match="multilingual"):
        Calibration("m.gguf", "", 0.5, 0.5, 0.5, None)
    declared = Calibration("m.gguf", "", 0.5, 0.5, 0.5, None, multilingual=True)
    assert declared.topic_for("料理") == 0.5


def test_a_multilingual_calibration_reuses_cjk_topics_and_finds_them_by_meaning() -> None:
    m = memory(MULTILINGUAL)
    m.store_qa("打包 发布", "twine", "Python 打包")
    stored = m.store_qa("打包 发布", "twine upload", "打包 Python")  # same words: cosine 1.0
    assert stored.topic.name == "Python 打包" and stored.topic.reused is True
    assert stored.thresholds == Thresholds(0.5, 0.5) and len(stored.suggestion) == 1
    found = m.query_qa("打包 发布", "发布 Python 打包")
    assert found.topic == "Python 打包" and found.threshold == 0.5 and len(found.answers) == 2


def test_script_classes() -> None:
    assert script_of("Crème brûlée, naïve café 42!") == LATIN
    assert script_of("") == LATIN
    for text in ("Python打包", "料理", "ネットワーク", "Привет", "한국어"):
        assert script_of(text) == OTHER


def memory(calibration: Calibration, thresholds: Thresholds | None = None) -> Memorizer:
    return Memorizer(InMemoryMemoryStore(), FakeEmbedder(), FixedClock(), thresholds, calibration)


def test_a_refused_threshold_never_reuses_a_topic_or_suggests_a_fusion() -> None:
    m = memory(LATIN_ONLY)
    m.store_qa("打包 发布", "twine", "Python 打包")
    stored = m.store_qa("打包 发布", "twine upload", "打包 Python")  # same words: cosine 1.0
    assert stored.topic.name == "打包 Python" and stored.topic.reused is False
    assert stored.thresholds == Thresholds(None, None)
    assert stored.suggestion == []
    same = m.store_qa("打包 发布", "twine upload dist", "Python 打包")  # the exact name
    assert same.topic.reused is True and same.suggestion == []
    groups, threshold = m.plan_merge(None, None)
    assert groups == [] and threshold == 0.5
    found = m.query_qa("打包 发布", "发布 Python 打包")
    assert found.topic is None and found.threshold is None
    by_name = m.query_qa("打包 发布", "Python 打包")  # the topic's exact name
    assert by_name.topic == "Python 打包" and len(by_name.answers) == 2
    # a caller's explicit threshold still groups them (their decision)
    groups, threshold = m.plan_merge(None, 0.5)
    assert len(groups) == 1 and threshold == 0.5


def test_latin_text_uses_its_threshold_and_the_model_is_reported() -> None:
    m = memory(LATIN_ONLY)
    first = m.store_qa("install package pip", "pip install", "python packaging")
    second = m.store_qa("install package pip now", "pip install x", "packaging python")
    assert second.topic.name == "python packaging" and second.topic.reused is True
    assert [s.record.id for s in second.suggestion] == [first.record.id]
    assert second.thresholds == Thresholds(0.5, 0.5) and second.calibration == "fake-embed"
    assert m.resolve_topic("python packaging things") == "python packaging"


def test_overrides_apply_to_every_script() -> None:
    m = memory(LATIN_ONLY, Thresholds(topic=0.5, fusion=0.5))
    m.store_qa("打包 发布", "twine", "Python 打包")
    stored = m.store_qa("打包 发布", "twine upload", "打包 Python")
    assert stored.topic.name == "Python 打包" and stored.topic.reused is True
    assert stored.thresholds == Thresholds(0.5, 0.5) and len(stored.suggestion) == 1


def test_an_unknown_model_gets_the_fallback() -> None:
    m = Memorizer(InMemoryMemoryStore(), FakeEmbedder(model_name="x.gguf"), FixedClock())
    assert m.calibration is FALLBACK_CALIBRATION
    stored = m.store_qa("q one", "a", "topic")
    assert stored.thresholds == Thresholds(0.90, 0.90) and stored.calibration == ""


def test_similar_groups_asks_a_callable_per_pair() -> None:
    vector = (1.0, 0.0)  # every pair is 1.0 similar: only the threshold decides
    records = [
        MemoryRecord(f"qa-{n}", QA, "t", q, "x", f"2026-01-0{n}", "", vector=vector)
        for n, q in ((1, "first words"), (2, "other words"), (3, "其他"))
    ]
    asked: list[tuple[str, str]] = []

    def threshold(x: str, y: str) -> float | None:
        asked.append((x, y))
        return None if script_of(x + y) == OTHER else 0.9

    groups = similar_groups(records, threshold)
    assert [g.ids for g in groups] == [("qa-1", "qa-2")]
    assert ("first words", "其他") in asked
    assert len(similar_groups(records, 0.9)[0].members) == 3  # a number applies to all
