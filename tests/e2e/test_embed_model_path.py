"""One embedding model file reached by two paths (REQ-VEC-MODEL-001), with real `qmd`
processes and the stand-in embedding model: an index embedded through path A is current when
the model is configured through a symlinked path B to the same file (`qmd status` shows
nothing pending, `qmd embed` embeds nothing and leaves the rows as they were, `qmd vsearch`
does not warn), and pending everywhere when path B names another file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp_harness import REPO, fixture_env

pytestmark = pytest.mark.models

MODELS = REPO / ".models"
EMBED_FILE = "all-MiniLM-L6-v2-f16.gguf"
OTHER_FILE = "gemma-3-270m-q4_k_m.gguf"  # another model file, never loaded here


def _rows(db: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT hash, seq, model, embed_fingerprint, total_chunks, embedded_at"
            " FROM content_vectors ORDER BY hash, seq"
        ).fetchall()


def test_a_symlinked_path_to_the_same_model_file_keeps_the_index_embedded(
    tmp_path: Path,
) -> None:
    for name in (EMBED_FILE, OTHER_FILE):
        if not (MODELS / name).is_file():
            pytest.fail(f"test model {name} missing; run: python scripts/prepare_models.py")
    corpus = tmp_path / "notes"
    corpus.mkdir()
    for name, text in {
        "cats.md": "# Cats\n\nCats sleep most of the day and hunt at night.\n",
        "rust.md": "# Rust\n\nThe borrow checker rejects two mutable references.\n",
        "bread.md": "# Bread\n\nKnead the dough, let it rise, then bake it hot.\n",
    }.items():
        (corpus / name).write_text(text, encoding="utf-8")
    path_a = MODELS / EMBED_FILE
    checkout = tmp_path / "checkout"  # another checkout whose .models links to the same folder
    checkout.mkdir()
    (checkout / ".models").symlink_to(MODELS, target_is_directory=True)
    path_b = checkout / ".models" / EMBED_FILE
    env = {**fixture_env(tmp_path), "PYTHONPATH": str(REPO)}
    db = env["INDEX_PATH"]

    def qmd(model: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "adapters.cli.main", *args],
            env={**env, "QMD_EMBED_MODEL": str(model)},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    assert qmd(path_a, "collection", "add", str(corpus), "--name", "notes").returncode == 0
    embedded = qmd(path_a, "embed")
    assert embedded.returncode == 0, embedded.stderr
    assert "Embedded" in embedded.stdout
    rows = _rows(db)
    assert {row[2] for row in rows} == {str(path_a)}

    status = qmd(path_b, "status")
    assert status.returncode == 0, status.stderr
    assert "need embedding" not in status.stdout, status.stdout
    assert "embedded with" not in status.stdout  # not reported as another model's vectors
    again = qmd(path_b, "embed")
    assert again.returncode == 0, again.stderr
    assert "All documents are embedded" in again.stdout, again.stdout
    assert _rows(db) == rows  # nothing re-embedded, no row renamed
    search = qmd(path_b, "vsearch", "bread dough")
    assert search.returncode == 0, search.stderr
    assert "need embeddings" not in search.stderr, search.stderr
    assert "bread.md" in search.stdout

    # path B now names another file (the link points elsewhere): the vectors are not its own
    (checkout / ".models").unlink()
    (checkout / ".models").mkdir()
    path_b.symlink_to(MODELS / OTHER_FILE)
    status = qmd(path_b, "status")
    assert "Pending:  3 need embedding" in status.stdout, status.stdout
    assert _rows(db) == rows
