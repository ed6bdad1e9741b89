"""`qmd update` on PostgreSQL SIGKILLed while it writes batches (REQ-INDEX-BATCH-001): the
index keeps what its last committed transaction wrote, BM25's kept figures included (each
lexeme's document count equals the count over the full-text rows, `fts_stats` the rows'
number and total length, one full-text row per active document), and a rerun completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.postgres.store import PostgresIndex
from tests.mcp_harness import fixture_env
from tests.postgres_server import drop_schema, fresh_schema_url

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
FILES = 2500  # three batches: a kill lands before, between or within their writes


def _check(url: str) -> int:
    index = PostgresIndex.open(url, env={})
    try:
        with index.connection() as conn:
            kept = conn.execute(
                "SELECT lexeme, documents FROM fts_lexemes WHERE documents <> 0 ORDER BY lexeme"
            ).fetchall()
            counted = conn.execute(
                "SELECT lexeme, COUNT(*) FROM documents_fts, unnest(tsvector_to_array(tsv))"
                " AS lexeme GROUP BY lexeme ORDER BY lexeme"
            ).fetchall()
            stats = conn.execute("SELECT documents, total_len FROM fts_stats").fetchone()
            rows = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(len), 0) FROM documents_fts"
            ).fetchone()
            active = conn.execute("SELECT COUNT(*) FROM documents WHERE active = 1").fetchone()
            unindexed = conn.execute(
                "SELECT COUNT(*) FROM documents d WHERE d.active = 1"
                " AND NOT EXISTS (SELECT 1 FROM documents_fts f WHERE f.id = d.id)"
            ).fetchone()
    finally:
        index.close()
    assert [tuple(r) for r in kept] == [tuple(r) for r in counted]
    assert stats == rows and rows is not None and active is not None
    assert rows[0] == active[0] and unindexed == (0,)
    return int(active[0])


def test_an_update_killed_while_writing_batches_leaves_consistent_figures(tmp_path: Path) -> None:
    url, schema = fresh_schema_url()
    notes = tmp_path / "notes"
    notes.mkdir()
    for n in range(FILES):
        (notes / f"n{n:05d}.md").write_text(
            f"# Note {n}\n\nword{n % 97} shared{n % 7} text number{n}\n", encoding="utf-8"
        )
    env = {**fixture_env(tmp_path), "PYTHONPATH": str(REPO)}
    qmd = [sys.executable, "-m", "adapters.cli", "--index-url", url]
    try:
        done = subprocess.run(
            [*qmd, "collection", "add", str(notes), "--name", "n"],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert _check(url) == FILES
        # every file changed: the update rewrites every document, 1,000 a batch
        for n in range(FILES):
            (notes / f"n{n:05d}.md").write_text(
                f"# Note {n}\n\nother{n % 89} changed{n % 5} text number{n}\n", encoding="utf-8"
            )
        started = time.monotonic()
        calibrate = subprocess.run(
            [*qmd, "update"], env=env, capture_output=True, text=True, timeout=300, check=False
        )
        full = time.monotonic() - started
        assert calibrate.returncode == 0, calibrate.stderr
        assert _check(url) == FILES
        for n in range(FILES):  # changed again, so the killed run has everything to write
            (notes / f"n{n:05d}.md").write_text(
                f"# Note {n}\n\nthird{n % 83} n{n}\n", encoding="utf-8"
            )
        kills = 0
        for share in (0.35, 0.55, 0.75, 0.9):
            process = subprocess.Popen(
                [*qmd, "update"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            time.sleep(full * share)
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                kills += 1
            process.wait(timeout=60)
            assert _check(url) == FILES
        assert kills >= 1
        rerun = subprocess.run(
            [*qmd, "update"], env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert rerun.returncode == 0, rerun.stderr
        assert _check(url) == FILES
    finally:
        drop_schema(schema)
