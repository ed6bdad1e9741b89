"""The MemoryStore port (REQ-MEM-STORE-*), held to one contract by the fake and by the
markdown-files-plus-index adapter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

import pytest

from adapters.fs.memory import MarkdownMemoryStore
from adapters.postgres.store import PostgresIndex
from domain.memory import KNOWLEDGE, QA, MemoryRecord, Topic, parse_record, record_path
from tests.backend_locations import BACKENDS, opened_backend
from tests.fakes import InMemoryMemoryStore
from tests.postgres_server import drop_schema, fresh_schema_url

MemoryLike = InMemoryMemoryStore | MarkdownMemoryStore


# the fake store, and the markdown files over each registered backend's memory rows
@pytest.fixture(params=["fake", *(f"markdown-{backend}" for backend in BACKENDS)])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryLike]:
    if request.param == "fake":
        yield InMemoryMemoryStore()
        return
    with opened_backend(request.param.removeprefix("markdown-"), tmp_path) as backend:
        # as adapters/memory_wiring.py builds it: the backend's shared lock where it has one
        # (PostgreSQL's advisory locks), else the memory folder's lock file
        shared = backend.lock

        def lock() -> AbstractContextManager[bool]:
            assert shared is not None
            return shared("memory", True)

        folder = str(tmp_path / "memory")
        store = MarkdownMemoryStore(folder, backend.memory(), lock if shared else None)
        try:
            yield store
        finally:
            store.close()


def qa(n: int, topic: str = "t", **changes: object) -> MemoryRecord:
    record = MemoryRecord(
        id=f"qa-{n}",
        kind=QA,
        topic=topic,
        question=f"question {n}?",
        text=f"answer {n}",
        created=f"2026-01-0{n}T00:00:00Z",
        updated=f"2026-01-0{n}T00:00:00Z",
        vector=(float(n), 1.0),
    )
    return replace(record, **changes)  # type: ignore[arg-type]


def file_text(memory: MemoryLike, record: MemoryRecord) -> str:
    if isinstance(memory, InMemoryMemoryStore):
        return memory.files[record_path(record)]
    return (memory.folder / record_path(record)).read_bytes().decode("utf-8")


def edit(memory: MemoryLike, record: MemoryRecord, text: str | None) -> None:
    """What a person (or a crash) does to a record's file; None deletes it."""
    if isinstance(memory, InMemoryMemoryStore):
        if text is None:
            del memory.files[record_path(record)]
        else:
            memory.files[record_path(record)] = text
        return
    path = memory.folder / record_path(record)
    if text is None:
        path.unlink()
    else:
        path.write_text(text, encoding="utf-8")


def test_put_then_get_and_filter(memory: MemoryLike) -> None:
    knowledge = qa(3, kind=KNOWLEDGE, question="", sources=("qa-1", "qa-2"))
    memory.put([knowledge, qa(1), qa(2, topic="other")])
    assert memory.get("qa-1") == qa(1) and memory.get("qa-1").vector == (1.0, 1.0)  # type: ignore[union-attr]
    assert memory.get("nope") is None
    assert [r.id for r in memory.records("t", QA)] == ["qa-1"]
    assert [r.id for r in memory.records(None, QA)] == ["qa-1", "qa-2"]
    assert [r.id for r in memory.records("t", KNOWLEDGE)] == ["qa-3"]


def test_the_file_is_markdown_with_front_matter(memory: MemoryLike) -> None:
    record = qa(1, question="Wie geht's? 中文", text="# Heading\n\nbody")
    memory.put([record])
    text = file_text(memory, record)
    assert text.startswith('---\nid: "qa-1"\n') and "\n---\n\n# Heading\n\nbody\n" in text
    assert parse_record(text) == record


def test_topics(memory: MemoryLike) -> None:
    memory.add_topic(Topic("b", (0.0, 1.0)))
    memory.add_topic(Topic("a", (1.0, 0.0)))
    assert memory.topics() == [Topic("a", (1.0, 0.0)), Topic("b", (0.0, 1.0))]


def test_load_keeps_vectors_of_unchanged_files(memory: MemoryLike) -> None:
    memory.put([qa(1), qa(2)])
    loaded = {r.id: r for r in memory.load()}
    assert loaded == {"qa-1": qa(1), "qa-2": qa(2)}
    assert loaded["qa-1"].vector == (1.0, 1.0)


def test_a_hand_edited_answer_loses_its_vector(memory: MemoryLike) -> None:
    memory.put([qa(1)])
    edit(memory, qa(1), file_text(memory, qa(1)).replace("answer 1", "a better answer"))
    (loaded,) = memory.load()
    assert loaded.text == "a better answer" and loaded.vector == ()


def test_a_changed_flag_keeps_the_vector(memory: MemoryLike) -> None:
    memory.put([qa(1)])
    edit(memory, qa(1), file_text(memory, qa(1)).replace("merged: false", "merged: true"))
    (loaded,) = memory.load()
    assert loaded.merged is True and loaded.vector == (1.0, 1.0)


def test_a_deleted_file_is_forgotten(memory: MemoryLike) -> None:
    memory.put([qa(1), qa(2)])
    edit(memory, qa(2), None)
    assert [r.id for r in memory.load()] == ["qa-1"]
    assert memory.get("qa-2") is None


def test_exclusive_is_a_context_manager(memory: MemoryLike) -> None:
    with memory.exclusive():
        memory.put([qa(1)])
    assert memory.get("qa-1") is not None


@pytest.mark.postgres
def test_exclusive_holds_postgresql_advisory_lock(tmp_path: Path) -> None:
    """On PostgreSQL the writers' lock is the index's advisory lock: another process (here a
    second pool) sees it taken while a writer holds it, and free afterwards."""
    url, schema = fresh_schema_url()
    pg, other = PostgresIndex.open(url), PostgresIndex.open(url)
    try:

        def advisory() -> AbstractContextManager[bool]:
            return pg.index_lock("memory", True)

        store = MarkdownMemoryStore(str(tmp_path / "memory"), pg, lock=advisory)
        with store.exclusive():
            with store.exclusive():  # nested: still one lock
                assert not other.lock_is_free("memory")
            assert not other.lock_is_free("memory")
        assert other.lock_is_free("memory")
    finally:
        other.close()
        pg.close()
        drop_schema(schema)


# every character str.splitlines() treats as a line break, and a few more that must survive
AWKWARD = "a\u2028b\u2029c\u0085d\x0be\x0cf\x1cg\x1dh\x1ei\rj é \U0001f600 \u200d x\u0301"


def test_any_unicode_text_round_trips_byte_for_byte(memory: MemoryLike) -> None:
    """REQ-MEM-STORE-007 (issue 22 finding 8): read back from the folder, unchanged."""
    record = qa(1, question=f"Q {AWKWARD}?", topic=f"T {AWKWARD}", text=f"A {AWKWARD}\r\nend")
    knowledge = qa(
        2, kind=KNOWLEDGE, question="", sources=("qa-1",), source_questions=(record.question,)
    )
    memory.put([record, knowledge])
    loaded = {r.id: r for r in memory.load()}
    for stored in (record, knowledge):
        again = loaded[stored.id]
        assert (again.question, again.topic, again.text, again.source_questions) == (
            stored.question,
            stored.topic,
            stored.text,
            stored.source_questions,
        )
        assert again.vector == stored.vector  # unchanged files keep their vectors
    assert parse_record(file_text(memory, record)) == record
