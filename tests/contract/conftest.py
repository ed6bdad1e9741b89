"""Each contract test runs once per implementation of its port: the fake, SQLite and
PostgreSQL (a fresh schema on the session's local server, tests/postgres_server.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from adapters.postgres.store import PostgresIndex
from adapters.sqlite.driver import connect
from adapters.sqlite.store import SqliteIndex
from tests.fakes import InMemoryStore
from tests.postgres_server import drop_schema, fresh_schema_url

StoreLike = InMemoryStore | SqliteIndex | PostgresIndex


@contextmanager
def open_store(kind: str, tmp_path: Path) -> Iterator[StoreLike]:
    """One implementation by name; `sqlite-prefilter` is SQLite with the vector prefilter on
    from the first vector (REQ-VEC-PREFILTER-001), so tiny corpora take that path too."""
    if kind == "fake":
        yield InMemoryStore()
        return
    if kind == "postgres":
        url, schema = fresh_schema_url()
        pg = PostgresIndex.open(url)
        try:
            yield pg
        finally:
            pg.close()
            drop_schema(schema)
        return
    path = tmp_path / "cache" / "qmd" / "index.sqlite"
    if kind == "sqlite-prefilter":
        path.parent.mkdir(parents=True, exist_ok=True)
        index = SqliteIndex(connect(path), prefilter_min_vectors=0)
    else:
        index = SqliteIndex.open(path)
    try:
        yield index
    finally:
        index.close()


@pytest.fixture(params=["fake", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreLike]:
    with open_store(request.param, tmp_path) as opened:
        yield opened
