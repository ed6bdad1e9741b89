"""`open_backend` of every registered backend returns a complete `Backend`: every field set
(the optional capabilities excepted, each named in `OPTIONAL_FIELDS`), each port answering on
a new index, and the hooks working (issue 24, docs/decisions/0050)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from adapters.storage.backend import FIELD_NAMES, OPTIONAL_FIELDS, TABLES, Backend
from adapters.storage.registry import all_kinds, open_backend
from tests.backend_locations import LOCATIONS

# backends whose writers lock with files beside the index instead of `Backend.lock`
FILE_LOCKED = ("sqlite",)
PARAMS = [
    pytest.param(kind.name, marks=[pytest.mark.postgres] if kind.name == "postgresql" else [])
    for kind in all_kinds()
]


def test_every_registered_backend_has_a_location_here() -> None:
    assert {kind.name for kind in all_kinds()} == set(LOCATIONS)


@contextmanager
def opened(kind: str, tmp_path: Path) -> Iterator[Backend]:
    with LOCATIONS[kind](tmp_path) as location:
        backend = open_backend(location)
        try:
            yield backend
        finally:
            backend.close()


@pytest.mark.parametrize("kind", PARAMS)
def test_open_backend_returns_every_field(kind: str, tmp_path: Path) -> None:
    with opened(kind, tmp_path) as backend:
        assert backend.name == kind
        assert tuple(f.name for f in dataclasses.fields(backend)) == FIELD_NAMES
        unset = {name for name in FIELD_NAMES if getattr(backend, name) is None}
        assert unset <= OPTIONAL_FIELDS, unset
        assert (backend.lock is None) == (backend.lock_holder is None)
        assert backend.errors and all(issubclass(e, Exception) for e in backend.errors)


@pytest.mark.parametrize("kind", PARAMS)
def test_each_port_of_a_new_backend_answers(kind: str, tmp_path: Path) -> None:
    with opened(kind, tmp_path) as backend:
        assert backend.index.total_documents() == 0
        assert backend.index.list_collections() == []
        assert backend.chunks.live_chunk_count() == 0
        assert backend.chunks.summarized_ids() == set()
        assert backend.ledger.extraction_states() == []
        rows = backend.memory()
        rows.put_memory_topic("t", b"\x00" * 8)
        assert rows.memory_topics() == [("t", b"\x00" * 8)]
        if backend.stamps is not None:
            assert backend.stamps.file_stamps("docs") == {}
        assert backend.size() >= 0
        backend.interrupt()  # nothing running: a no-op, never an error


@pytest.mark.parametrize("kind", PARAMS)
def test_the_lock_of_a_backend_excludes_a_second_holder(kind: str, tmp_path: Path) -> None:
    with opened(kind, tmp_path) as backend:
        if backend.lock is None or backend.lock_holder is None:
            # writers of a SQLite file take the lock files beside it (adapters/cli/runtime.py)
            assert kind in FILE_LOCKED and backend.lock_holder is None
            return
        with backend.lock("probe", False) as held:
            assert held
            assert "qmd probe" in (backend.lock_holder("probe") or "")
        assert backend.lock_holder("probe") is None


@pytest.mark.parametrize("kind", PARAMS)
def test_the_dump_of_a_new_backend_reads_every_table(kind: str, tmp_path: Path) -> None:
    with opened(kind, tmp_path) as backend:
        dump = backend.dump
        assert not dump.has_vectors()
        assert list(dump.vector_rows()) == []
        assert dump.has_table("documents") and not dump.has_table("no_such_table")
        with dump.snapshot():
            for table in TABLES:
                rows = list(dump.read_table(table, dump.own_config_keys))
                assert table.name == "store_config" or rows == [], table.name
                if table.serial:
                    assert dump.high_water(table) == 0
