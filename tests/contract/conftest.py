"""Each contract test runs once per implementation of its port: the fake and the real adapter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.sqlite.store import SqliteIndex
from tests.fakes import InMemoryStore

StoreLike = InMemoryStore | SqliteIndex


@pytest.fixture(params=["fake", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreLike]:
    if request.param == "fake":
        yield InMemoryStore()
        return
    index = SqliteIndex.open(tmp_path / "cache" / "qmd" / "index.sqlite")
    try:
        yield index
    finally:
        index.close()
