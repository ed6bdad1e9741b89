"""`qmd status` counts what is current: vectors of removed or edited documents are not
"embedded" (they are shown apart until `qmd cleanup`), and a configured collection with
nothing indexed is listed, not hidden behind "No collections"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from adapters.bootstrap import build_app
from tests.mcp_harness import REPO, fixture_env

WHEN = "2025-01-01T00:00:00.000Z"


def _qmd(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def test_orphaned_vectors_are_not_counted_as_embedded(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name in ("a", "b", "c"):
        (corpus / f"{name}.md").write_text(f"# {name}\n{name} body\n")
    env = {**fixture_env(tmp_path), "PYTHONPATH": str(REPO)}
    app = build_app(env=env, with_models=False)
    try:
        app.collections.add(str(corpus), "c")
        for i, meta in enumerate(app.store.documents("c")):
            vectors = [(seq, seq * 10, [float(i), 1.0, float(seq), 0.5]) for seq in range(2)]
            app.vectors.store_chunk_vectors(meta.hash, vectors, "m", "f", WHEN)
    finally:
        app.close()
    (corpus / "a.md").write_text("# a\nedited body\n")  # its 2 old vectors become orphans
    (corpus / "b.md").unlink()  # and these 2
    _qmd(env, "update")
    status = _qmd(env, "status")
    assert "  Vectors:  2 embedded\n" in status, status
    assert "  Orphaned: 4 embedding chunks of removed documents" in status, status
    assert "Removed 4 orphaned embedding chunks" in _qmd(env, "cleanup")
    after = _qmd(env, "status")
    assert "  Vectors:  2 embedded\n" in after and "Orphaned" not in after, after


def test_a_configured_collection_with_nothing_indexed_is_listed(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    env = {**fixture_env(tmp_path), "PYTHONPATH": str(REPO)}
    _qmd(env, "collection", "add", str(empty), "--name", "pics")
    status = _qmd(env, "status")
    assert "No collections" not in status
    assert "  pics (qmd://pics/)\n" in status
    assert "    Files:    0 (nothing indexed; run 'qmd update')" in status
