"""A backend kind registered at run time (the tests' in-memory backend, tests/memory_backend)
is opened, labelled, told apart by its scheme and copied like a production one, without joining
`KINDS`; a second kind of the same name, or one that would take every location, is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.cli.index_copy import copy_index
from adapters.storage.registry import (
    KINDS,
    BackendKind,
    is_server,
    kind_of,
    open_backend,
    redacted,
    register_kind,
)
from domain.extraction import CachedExtraction
from domain.model import Collection
from domain.ports import DocumentCut
from domain.sections import split_sections
from tests.backend_locations import LOCATIONS
from tests.memory_backend.backend import forget


@pytest.fixture(autouse=True)
def _forget_the_indexes() -> Iterator[None]:
    yield
    for name in ("shared-rows", "other-rows", "staged", "copied"):
        forget(f"memory:{name}")


def test_the_fake_kind_takes_its_scheme_and_no_other() -> None:
    assert "fake" in LOCATIONS  # importing the locations registered it
    assert kind_of("memory:one").name == "fake"
    assert kind_of("index-memory:one.sqlite").name == "sqlite"
    assert kind_of("postgresql://h/db").name == "postgresql"
    assert redacted("memory:one") == "memory:one"
    assert "fake" not in {kind.name for kind in KINDS}


def test_two_openings_of_one_location_share_its_rows() -> None:
    first = open_backend("memory:shared-rows")
    first.index.set_config_value("k", "v")
    second = open_backend("memory:shared-rows")
    assert second.index.get_config_value("k") == "v"
    assert open_backend("memory:other-rows").index.get_config_value("k") is None


def test_a_staged_index_replaces_the_location_on_publish() -> None:
    live = open_backend("memory:staged")
    staged = open_backend("memory:staged", staged=True)
    staged.index.set_config_value("k", "new")
    assert live.index.get_config_value("k") is None and not live.replaced()
    staged.dump.publish()
    assert live.replaced()
    assert open_backend("memory:staged").index.get_config_value("k") == "new"


def test_registering_is_refused_for_a_taken_name_or_no_scheme() -> None:
    fake = kind_of("memory:x")
    register_kind(fake)  # the same kind again: nothing changes
    assert kind_of("memory:x") is fake
    with pytest.raises(ValueError, match="registered already"):
        register_kind(BackendKind("sqlite", ("other:",), "x.backend", "X", "-", "-"))
    with pytest.raises(ValueError, match="its own scheme"):
        register_kind(BackendKind("catch-all", (), "x.backend", "X", "-", "-"))
    assert not is_server("notes/index.sqlite") and is_server("memory:x")


def test_the_fakes_rows_copy_into_sqlite_as_they_are(tmp_path: Path) -> None:
    """The fake's dump gives its rows in `TABLES`' columns: `qmd index copy` moves them into a
    SQLite index, verified table by table, and the copy finds and reports what the fake did."""
    t = "2025-01-01T00:00:00.000Z"
    fake = open_backend("memory:copied")
    fake.index.put_collection(Collection("notes", str(tmp_path / "notes")))
    body = "# Alpha\n\nkettle and zebra\n"
    fake.index.upsert_document("notes", "a.md", "Alpha", "h" * 64, body, t, t)
    fake.index.put_metadata("notes", "a.md", {"tags": ("x",), "year": 2025})
    fake.chunks.replace_chunks([DocumentCut(1, "h" * 64, split_sections(body))])
    fake.ledger.remember_extraction(CachedExtraction("s1", "ok", text_hash="t1", title="T"))
    fake.index.store_chunk_vectors("h" * 64, [(0, 0, [1.0, 0.0])], "m", "fp", t)
    fake.index.set_config_value("global_context", "shared words")
    fake.index.put("cache-key", "cached")
    fake.memory().put_memory_topic("topic", b"\x00" * 8)
    sqlite = open_backend(str(tmp_path / "index.sqlite"))
    try:
        found = copy_index(fake, sqlite)
        assert found["documents"] == found["content"] == found["content_vectors"] == 1
        assert found["vectors"] == found["store_collections"] == found["memory_topics"] == 1
        assert found["py_document_metadata"] == found["extraction_cache"] == 1
        assert found["pyqmd_chunks"] == len(split_sections(body))
        assert sqlite.index.metadata_by_id([1]) == {1: {"tags": ("x",), "year": 2025}}
        assert [row.text for row in sqlite.chunks.document_chunks("notes", "a.md")] == [
            section.text for section in split_sections(body)
        ]
        assert sqlite.ledger.cached_extraction("s1") == fake.ledger.cached_extraction("s1")
        assert [c.name for c in sqlite.index.list_collections()] == ["notes"]
        assert sqlite.index.get_global_context() == "shared words"
        assert sqlite.index.get("cache-key") == "cached"
        assert sqlite.index.vector_count() == 1
        assert [meta.path for meta in sqlite.index.documents("notes")] == ["a.md"]
        assert sqlite.memory().memory_topics() == [("topic", b"\x00" * 8)]
    finally:
        sqlite.close()
