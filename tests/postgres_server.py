"""The local PostgreSQL (scripts/postgres.sh) for tests: started once per test session, and a
fresh schema per test so no test sees another's rows."""

from __future__ import annotations

import subprocess
import uuid
from functools import cache
from pathlib import Path

import psycopg
from psycopg import sql

from tests import needs

REPO = Path(__file__).resolve().parent.parent


def server_url() -> str:
    """Start the server (a no-op when it runs) and return its URL: the script's last line."""
    needs.require("postgres", "the local PostgreSQL")
    return _started_url()


@cache
def _started_url() -> str:
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
