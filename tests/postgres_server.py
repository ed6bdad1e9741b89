"""The local PostgreSQL (scripts/postgres.sh) for tests: started once per test session, and a
fresh schema per test so no test sees another's rows."""

from __future__ import annotations

import fcntl
import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import psycopg
from psycopg import sql

from adapters.postgres.fts import fts_params, fts_row_sql
from adapters.postgres.schema import MIGRATIONS, migrate
from adapters.postgres.url import split_schema
from tests import needs

REPO = Path(__file__).resolve().parent.parent
T0 = "2025-01-01T00:00:00.000Z"


def server_url() -> str:
    """Start the server (a no-op when it runs) and return its URL: the script's last line."""
    needs.require("postgres", "the local PostgreSQL")
    return _started_url()


@cache
def _started_url() -> str:
    # One start at a time: pytest-xdist workers each call this, and two `pg_ctl start` on
    # one data folder make the second fail.
    base = Path(os.environ.get("QMD_PG_DIR") or REPO / ".cache" / "postgres")
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "tests-start.lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            ["bash", str(REPO / "scripts" / "postgres.sh"), "start"],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/postgres.sh start failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def fresh_schema_url() -> tuple[str, str]:
    """(index URL, schema name) of a new, empty schema."""
    name = "t_" + uuid.uuid4().hex[:16]
    return f"{server_url()}?schema={name}", name


def drop_schema(name: str) -> None:
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@contextmanager
def older_index(version: int) -> Iterator[tuple[str, str, psycopg.Connection[tuple[object, ...]]]]:
    """(URL, schema, autocommit connection) of a fresh schema migrated to `version` only: an
    index an older qmd wrote. The caller drops the schema once the block has ended well."""
    url, schema = fresh_schema_url()
    conninfo, _ = split_schema(url)
    try:
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        with psycopg.connect(conninfo, options=f"-c search_path={schema},public") as conn:
            conn.autocommit = True
            assert migrate(conn, MIGRATIONS[:version]) == version
            yield url, schema, conn
    except BaseException:
        drop_schema(schema)
        raise


def write_old_document(conn: psycopg.Connection[tuple[object, ...]], n: int, body: str) -> None:
    """Document `c/n{n}.md` ("Note {n}", content hash `h{n}`) and its full-text row, written
    straight into the tables as an older qmd wrote them."""
    conn.execute(
        "INSERT INTO content (hash, doc, created_at) VALUES (%s, %s, %s)", (f"h{n}", body, T0)
    )
    row = conn.execute(
        "INSERT INTO documents (collection, path, title, hash, created_at, modified_at)"
        " VALUES ('c', %s, %s, %s, %s, %s) RETURNING id",
        (f"n{n}.md", f"Note {n}", f"h{n}", T0, T0),
    ).fetchone()
    assert row is not None
    conn.execute(fts_row_sql(), fts_params(int(row[0]), "c", f"n{n}.md", "", body))
