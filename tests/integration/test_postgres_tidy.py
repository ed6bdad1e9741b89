"""An indexing run on a PostgreSQL index ends by folding the GIN index's pending list into the
index, and a run that wrote at least a twentieth of the documents also refreshes the
planner's statistics (REQ-INDEX-FTS-TIDY-002). Searches read the whole pending list until it
is folded, and without statistics the planner guessed its way to scanning every row."""

from __future__ import annotations

import random
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from adapters.postgres.store import PostgresIndex
from domain.lexquery import parse_lex_query
from tests.postgres_server import drop_schema, fresh_schema_url, server_url

pytestmark = pytest.mark.postgres
T0 = "2025-01-01T00:00:00.000Z"


def _pending_pages(index: PostgresIndex) -> int:
    """Pages in GIN's pending list (folding them is what counts them; a second call: 0)."""
    with index.connection() as conn:
        row = conn.execute("SELECT gin_clean_pending_list('idx_documents_fts')").fetchone()
    assert row is not None
    return int(row[0])


def _analysed(index: PostgresIndex) -> set[str]:
    rows = index._query(
        "SELECT DISTINCT tablename FROM pg_stats WHERE schemaname = current_schema()"
        " AND tablename IN ('documents', 'documents_fts')"
    )
    return {str(row[0]) for row in rows}


def _write(index: PostgresIndex, rng: random.Random, first: int, count: int) -> None:
    with index.transaction():
        for n in range(first, first + count):
            body = " ".join(f"w{rng.randrange(2000)}" for _ in range(80))
            index.upsert_document("c", f"d{n}.md", f"T {n}", f"h{n}", body, T0, T0)


def test_a_run_folds_the_pending_list_and_a_large_one_refreshes_the_statistics() -> None:
    url, schema = fresh_schema_url()
    index = PostgresIndex.open(url, env={})
    rng = random.Random(2)
    try:
        with index.connection() as conn:  # no autovacuum racing the checks below
            for table in ("documents", "documents_fts"):
                conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        _write(index, rng, 0, 400)
        index.tidy_lexical_index(10)  # 10 of 400 written: below a twentieth
        assert _pending_pages(index) == 0  # folded all the same
        assert _analysed(index) == set()  # but no statistics taken

        _write(index, rng, 400, 30)
        assert _pending_pages(index) > 0  # (the control: a run leaves pages pending)
        _write(index, rng, 430, 30)
        index.tidy_lexical_index(30)  # 30 of 460: at least a twentieth
        assert _pending_pages(index) == 0
        assert _analysed(index) == {"documents", "documents_fts"}

        _write(index, rng, 460, 30)
        index.tidy_lexical_index(0)  # a run that wrote nothing (as far as it says) folds nothing
        assert _pending_pages(index) > 0
    finally:
        index.close()
        drop_schema(schema)


def _as_role(url: str, role: str, password: str) -> str:
    parts = urlsplit(url)
    where = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{role}:{password}@{where}"))


def test_a_writer_that_does_not_own_the_tables_keeps_its_writes() -> None:
    """Folding the pending list is for the index's owner; another role that may write (a
    shared server's second account) still indexes: the refusal is skipped, not the run."""
    url, schema = fresh_schema_url()
    role = f"{schema}_writer"
    owner = PostgresIndex.open(url, env={})
    writer: PostgresIndex | None = None
    try:
        with owner.connection() as conn:
            # a password: scripts/postgres.sh's server asks every connection for one
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(role)
                )
            )
            for grant in (
                "GRANT CREATE ON DATABASE {database} TO {role}",  # what opening one asks
                "GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}",
                "GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role}",
                "GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
                "GRANT ALL ON ALL FUNCTIONS IN SCHEMA {schema} TO {role}",
            ):
                conn.execute(
                    sql.SQL(grant).format(
                        database=sql.Identifier(urlsplit(url).path.strip("/")),
                        schema=sql.Identifier(schema),
                        role=sql.Identifier(role),
                    )
                )
        writer = PostgresIndex.open(_as_role(url, role, role), env={})
        with writer.transaction():
            writer.upsert_document("c", "a.md", "A", "ha", "kumquat pie", T0, T0)
            writer.tidy_lexical_index(1)
        hits = owner.search_lex(parse_lex_query("kumquat"), 10, None)
        assert [h.document.meta.path for h in hits] == ["a.md"]
    finally:
        if writer is not None:
            writer.close()
        owner.close()
        drop_schema(schema)
        with psycopg.connect(server_url(), autocommit=True) as conn:
            for drop in ("DROP OWNED BY {}", "DROP ROLE {}"):  # its grants, then the role
                conn.execute(sql.SQL(drop).format(sql.Identifier(role)))
