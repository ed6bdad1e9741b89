"""The index of metadata values (REQ-FILTER-009) reaches indexes made before it: a SQLite
index gets its pairs table, filled from the stored rows, on its next metadata write (filters
stay right before that); a PostgreSQL index at schema version 7 with rows gets its GIN index
on open."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from adapters.postgres.store import PostgresIndex
from adapters.sqlite.metadata import VALUES_TABLE, has_values_table
from adapters.sqlite.store import SqliteIndex
from domain.filters import MetaValue, narrowing, parse_filter
from domain.usecases.metadata import MetadataService
from tests.postgres_server import drop_schema, older_index, write_old_document

T0 = "2025-01-01T00:00:00.000Z"
RARE = {"key": "tags", "operator": "eq", "value": "rare"}


def _fill(index: SqliteIndex | PostgresIndex, docs: int) -> None:
    with index.transaction():
        for i in range(docs):
            body = f"note {i}"
            digest = hashlib.sha256(body.encode()).hexdigest()
            index.upsert_document("c", f"n{i}.md", f"N{i}", digest, body, T0, T0)
            tags: MetaValue = ("rare",) if i % 10 == 0 else ("ops",)
            index.put_metadata("c", f"n{i}.md", {"tags": tags, "n": i})


def test_a_sqlite_index_without_the_pairs_table_gets_it_on_its_next_write(
    tmp_path: Path,
) -> None:
    index = SqliteIndex.open(tmp_path / "index.sqlite")
    try:
        _fill(index, 50)
        conn = index.connection
        # as an index written before the pairs table existed
        for trigger in ("insert", "update", "delete"):
            conn.execute(f"DROP TRIGGER {VALUES_TABLE}_{trigger}")
        conn.execute(f"DROP TABLE {VALUES_TABLE}")
        service = MetadataService(index)
        node = parse_filter(RARE)
        want = {doc.id for doc in index.documents() if int(doc.path[1:-3]) % 10 == 0}
        assert service.scope(node) == want
        assert len(index.active_metadata(None, narrowing(node))) == 50  # read in full
        index.put_metadata("c", "n1.md", {"tags": ("rare",), "n": 1})
        assert has_values_table(conn)
        want.add(next(d.id for d in index.documents() if d.path == "n1.md"))
        assert service.scope(node) == want
        assert len(index.active_metadata(None, narrowing(node))) == 6  # through the pairs
    finally:
        index.close()


@pytest.mark.postgres
def test_a_version_7_postgres_index_gets_the_metadata_index_on_open() -> None:
    with older_index(7) as (url, schema, conn):
        for i in range(50):  # rows written before migration 8
            write_old_document(conn, i, f"note {i}")
            tags = '["rare"]' if i % 10 == 0 else '["ops"]'
            conn.execute(
                "INSERT INTO py_document_metadata (doc_id, metadata) SELECT id, %s"
                " FROM documents WHERE path = %s",
                (f'{{"n":{i},"tags":{tags}}}', f"n{i}.md"),
            )
    try:
        index = PostgresIndex.open(url, env={})  # migration 8 on open
        try:
            node = parse_filter(RARE)
            assert len(index.active_metadata(None, narrowing(node))) == 5
            want = {d.id for d in index.documents() if int(d.path[1:-3]) % 10 == 0}
            assert MetadataService(index).scope(node) == want
        finally:
            index.close()
    finally:
        drop_schema(schema)
