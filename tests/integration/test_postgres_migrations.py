"""An index made before the later tables (schema version 1: QMD 2.8.3's tables only) is brought
up to date when it is opened: its documents stay, and metadata, the extraction ledger, the
memory rows and the chunk rows work on it (adapters/postgres/schema.py)."""

from __future__ import annotations

import psycopg
from psycopg import sql

from adapters.postgres.schema import MIGRATIONS, SCHEMA_VERSION, current_version, migrate
from adapters.postgres.store import PostgresIndex
from adapters.postgres.url import split_schema
from domain.extraction import ExtractionState
from domain.ports import DocumentCut
from domain.sections import split_sections
from tests.postgres_server import drop_schema, fresh_schema_url

T0 = "2025-01-01T00:00:00.000Z"


def test_a_version_1_index_is_migrated_on_open() -> None:
    url, schema = fresh_schema_url()
    conninfo, _ = split_schema(url)
    try:
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        with psycopg.connect(conninfo, options=f"-c search_path={schema},public") as conn:
            conn.autocommit = True
            assert current_version(conn) == 0
            assert migrate(conn, MIGRATIONS[:1]) == 1
            conn.execute(
                "INSERT INTO content (hash, doc, created_at) VALUES ('h', '# A\nalpha', %s)", (T0,)
            )
            conn.execute(
                "INSERT INTO documents (collection, path, title, hash, created_at, modified_at) "
                "VALUES ('c', 'a.md', 'A', 'h', %s, %s)",
                (T0, T0),
            )
        index = PostgresIndex.open(url)
        try:
            with index.connection() as conn:
                assert current_version(conn) == SCHEMA_VERSION == 5
            (doc,) = index.documents()
            index.put_metadata("c", "a.md", {"author": "Ana"})
            assert index.metadata_by_id([doc.id]) == {doc.id: {"author": "Ana"}}
            index.record_states("c", [ExtractionState("c", "a.pdf", "ok")])
            assert index.extraction_state("c", "a.pdf") is not None
            index.put_memory_topic("t", b"\x00" * 8)
            assert index.memory_topics() == [("t", b"\x00" * 8)]
            index.replace_chunks([DocumentCut(doc.id, "h", split_sections("# A\nalpha"))])
            assert [r.heading_path for r in index.document_chunks("c", "a.md")] == ["A"]
        finally:
            index.close()
    finally:
        drop_schema(schema)
