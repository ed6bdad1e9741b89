"""The original QMD 2.8.3 still opens and serves an index that holds extracted PDF, DOCX and
HTML documents and our extraction tables (REQ-EXTRACT-007). Needs the original
(scripts/install_original.sh); a missing install fails, it never skips."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.original import original_qmd
from tooling.docgen import build_fixture

pytestmark = pytest.mark.original

REPO = Path(__file__).resolve().parents[2]


def _ours(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", *args],
        env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_the_original_serves_an_index_with_extracted_documents(tmp_path: Path) -> None:
    original = original_qmd(tmp_path / "home")
    folder = tmp_path / "docs"
    build_fixture(folder)
    _ours(original.env, "collection", "add", str(folder), "--name", "docs",
          "--mask", "**/*.{md,pdf,docx,html}")  # fmt: skip
    with sqlite3.connect(original.db_path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"extraction_state", "extraction_cache"} <= tables

    listing = original.run("ls", "docs")
    for name in ("survey.pdf", "handbook.docx", "guide.html", "notes.md"):
        assert name in listing, listing
    found = json.loads(original.run("search", "albatross", "--json"))
    assert [hit["file"] for hit in found] == ["qmd://docs/survey.pdf"], found
    found = json.loads(original.run("search", "goggles", "--json"))
    assert [hit["file"] for hit in found] == ["qmd://docs/handbook.docx"], found
    document = original.run("get", "qmd://docs/survey.pdf")
    assert "## Page 3" in document and "Sediment cores" in document, document
    assert "Documents" in original.run("status")

    # and the index is still ours afterwards: the states survive the original's visit
    status = _ours(original.env, "status")
    assert "docs/broken.pdf: corrupt" in status, status
    assert "docs/survey.pdf: no text layer on page 2" in status
