"""Each contract test runs once per implementation of its port: the fake, SQLite and
PostgreSQL (a fresh schema on the session's local server, tests/postgres_server.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.postgres.store import PostgresIndex
from adapters.sqlite.store import SqliteIndex
from tests.fakes import InMemoryStore
from tests.postgres_server import drop_schema, fresh_schema_url

StoreLike = InMemoryStore | SqliteIndex | PostgresIndex


@pytest.fixture(params=["fake", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreLike]:
    if request.param == "fake":
        yield InMemoryStore()
        return
    if request.param == "postgres":
        url, schema = fresh_schema_url()
        pg = PostgresIndex.open(url)
        try:
            yield pg
        finally:
            pg.close()
            drop_schema(schema)
        return
    index = SqliteIndex.open(tmp_path / "cache" / "qmd" / "index.sqlite")
    try:
        yield index
    finally:
        index.close()
