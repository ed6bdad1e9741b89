"""Each contract test runs once per registered storage backend (tests/backend_locations.py):
the in-memory fake, SQLite and PostgreSQL (a fresh schema on the session's local server,
tests/postgres_server.py), each opened through `open_backend`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from adapters.sqlite.driver import connect
from adapters.sqlite.store import SqliteIndex
from adapters.storage.backend import StoreIndex
from tests.backend_locations import BACKENDS, opened_backend

StoreLike = StoreIndex


@contextmanager
def open_store(kind: str, tmp_path: Path) -> Iterator[StoreLike]:
    """One implementation by name: a registered backend's index opened through the registry
    at a new location (tests/backend_locations.py); `sqlite-prefilter` is SQLite with the
    vector prefilter on from the first vector (REQ-VEC-PREFILTER-001), so tiny corpora take
    that path too."""
    if kind == "sqlite-prefilter":
        path = tmp_path / "cache" / "qmd" / "index.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        index = SqliteIndex(connect(path), prefilter_min_vectors=0)
        try:
            yield index
        finally:
            index.close()
        return
    with opened_backend(kind, tmp_path) as backend:
        yield backend.index


@pytest.fixture(params=[*BACKENDS])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreLike]:
    with open_store(request.param, tmp_path) as opened:
        yield opened
