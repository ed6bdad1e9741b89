"""One contract for every ExtractionLedger: the SQLite tables and the in-memory fake."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.sqlite.extraction import SqliteExtractionLedger
from adapters.sqlite.store import SqliteIndex
from domain.extraction import CachedExtraction, ExtractionState
from domain.ports import ExtractionLedger
from tests.backend_locations import BACKENDS, opened_backend


@pytest.fixture(params=[*BACKENDS])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ExtractionLedger]:
    with opened_backend(request.param, tmp_path) as backend:
        yield backend.ledger


def test_cache_round_trip(ledger: ExtractionLedger) -> None:
    assert ledger.cached_extraction("h1") is None
    ok = CachedExtraction(
        "h1", "ok", text_hash="t1", title="T", metadata={"author": "A", "tags": ["x"]},
        pages=3, empty_pages=(2,),
    )  # fmt: skip
    failed = CachedExtraction("h2", "failed", reason="corrupt", detail="bad xref")
    ledger.remember_extraction(ok)
    ledger.remember_extraction(failed)
    assert ledger.cached_extraction("h1") == ok
    assert ledger.cached_extraction("h2") == failed


def test_states_are_replaced_per_collection(ledger: ExtractionLedger) -> None:
    a = ExtractionState("c", "a.pdf", "ok", source_hash="h1", empty_pages=(2, 3), pages=3)
    b = ExtractionState("c", "b.pdf", "failed", reason="zip-bomb", detail="too big")
    other = ExtractionState("d", "x.pdf", "ok")
    ledger.record_states("c", [a, b])
    ledger.record_states("d", [other])
    assert ledger.extraction_states() == [a, b, other]
    assert ledger.extraction_state("c", "b.pdf") == b
    ledger.record_states("c", [a])
    assert ledger.extraction_states("c") == [a]
    assert ledger.extraction_state("c", "b.pdf") is None
    assert ledger.extraction_state("d", "x.pdf") == other


def test_sqlite_ledger_adds_no_table_to_a_markdown_only_index(tmp_path: Path) -> None:
    index = SqliteIndex.open(tmp_path / "index.sqlite", {})
    try:
        ledger = SqliteExtractionLedger(index.connection)
        ledger.record_states("notes", [])
        assert ledger.extraction_states() == []
        names = {r[0] for r in index.connection.query("SELECT name FROM sqlite_master")}
        assert not any(name.startswith("extraction_") for name in names)
    finally:
        index.close()
