"""Schemas `qmd index copy` writes into (REQ-INDEX-COPY-LOCK-001, REQ-INDEX-COPY-STALE-001):
a schema a copy makes is marked as staging (a comment, in the transaction that creates it)
until the copy's own transaction commits its rows and clears the mark. A marked schema that
no copy holds the lock of and that holds no document is what a killed copy left behind."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from adapters.postgres.connection import schema_lock
from adapters.postgres.url import split_schema
from adapters.storage.backend import Leftover

# the comment on a schema a copy made and has not finished; cleared when its rows commit
STAGING_MARK = "qmd index copy: staging, not finished"
COPY_LOCK = "update"  # the lock `collection add` and `update` take (ADR 0047)
COPY_LABEL = "index copy"

State = Literal["absent", "leftover", "present"]


def _conn(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    return psycopg.connect(split_schema(url)[0], autocommit=True)


def _holds_rows(conn: psycopg.Connection[tuple[Any, ...]], schema: str) -> bool:
    for table in ("documents", "content"):
        found = conn.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s", (schema, table)
        ).fetchone()
        if found is not None:
            name = sql.Identifier(schema, table)
            if conn.execute(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(name)).fetchone():
                return True
    return False


def _marked(conn: psycopg.Connection[tuple[Any, ...]], schema: str) -> bool | None:
    """None: no such schema; else whether it carries the staging mark."""
    row = conn.execute(
        "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
        (schema,),
    ).fetchone()
    return None if row is None else row[0] == STAGING_MARK


def staging_state(url: str) -> State:
    """The URL's schema: absent, a killed copy's empty staging schema, or anything else."""
    schema = split_schema(url)[1]
    if not schema:
        return "present"
    with _conn(url) as conn:
        marked = _marked(conn, schema)
        if marked is None:
            return "absent"
        return "leftover" if marked and not _holds_rows(conn, schema) else "present"


def create_staged(url: str) -> bool:
    """Make the URL's schema, marked as staging, in one transaction: a copy killed at any
    point leaves either no schema or a marked one. False: another process made it first (a
    reader opening the index makes its schema without the copy's lock)."""
    schema = split_schema(url)[1]
    assert schema, "only a named schema is made by a copy"
    try:
        with psycopg.connect(split_schema(url)[0]) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            conn.execute(
                sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                    sql.Identifier(schema), sql.Literal(STAGING_MARK)
                )
            )
    except psycopg.errors.DuplicateSchema:
        return False
    return True


def unmark_statement(schema: str) -> sql.Composed:
    """Run in the copy's own transaction, so the mark goes exactly when its rows commit."""
    return sql.SQL("COMMENT ON SCHEMA {} IS NULL").format(sql.Identifier(schema))


def with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "schema"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("schema", schema)])))


def _marked_schemas(url: str) -> list[str]:
    with _conn(url) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace "
            "WHERE obj_description(oid, 'pg_namespace') = %s ORDER BY nspname",
            (STAGING_MARK,),
        ).fetchall()
    return [str(row[0]) for row in rows]


def _drop_if_stale(url: str) -> bool:
    """Drop the URL's schema if, under its lock, it is still a marked schema without rows."""
    schema = split_schema(url)[1]
    if not schema:
        return False
    with schema_lock(url, COPY_LOCK, "index tidy") as holder:
        if holder is not None:
            return False
        with _conn(url) as conn:
            if not _marked(conn, schema) or _holds_rows(conn, schema):
                return False
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return True


def staging_leftovers(
    location: str, file_lock: Callable[[str], AbstractContextManager[bool]]
) -> Iterator[Leftover]:
    """Every staging schema of the location's database that a killed copy left: marked,
    without rows, and no process holding its lock (`file_lock` is for file backends)."""
    for schema in _marked_schemas(location):
        url = with_schema(location, schema)
        with schema_lock(url, COPY_LOCK, "doctor") as holder:
            if holder is not None:
                continue  # a copy is writing it now
            with _conn(url) as conn:
                if _holds_rows(conn, schema):
                    continue
        yield Leftover(
            f"schema {schema}: an empty schema left by a `qmd index copy` that did not finish",
            functools.partial(_drop_if_stale, url),
        )
