"""Chunk rows are extra tables only: an index with them still opens and serves in the original
QMD 2.8.3, and what the original changes in it is repaired by our next update
(REQ-PROJMEM-CHUNK-003). Needs the original (scripts/install_original.sh); never skips."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from adapters.bootstrap import build_app
from domain.errors import QmdError
from tests.original import original_qmd

pytestmark = pytest.mark.original

NOTES = {
    "auth.md": "# Auth\n\nintro\n\n## Tokens\n\nTokens rotate hourly.\n",
    "ops/redis.md": "# Redis\n\nSessions live in redis.\n\n## Eviction\n\nallkeys-lru\n",
}


def _tables(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()


def test_an_index_with_chunk_rows_is_served_by_the_original(tmp_path: Path) -> None:
    qmd = original_qmd(tmp_path / "home")
    notes = tmp_path / "notes"
    for name, text in NOTES.items():
        (notes / name).parent.mkdir(parents=True, exist_ok=True)
        (notes / name).write_text(text, encoding="utf-8")
    env = dict(qmd.env)
    app = build_app(env=env, with_models=False)
    try:
        app.collections.add(str(notes), "notes")
        assert app.chunks is not None
        assert [r.heading_path for r in app.chunks.get("notes/auth.md")] == [
            "Auth",
            "Auth > Tokens",
        ]
    finally:
        app.close()
    assert {"pyqmd_chunks", "pyqmd_namespaces", "pyqmd_session_summaries"} <= _tables(qmd.db_path)

    assert "notes (qmd://notes/)" in qmd.run("collection", "list")
    assert "Sessions live in redis." in qmd.run("get", "qmd://notes/ops/redis.md")
    assert "qmd://notes/ops/redis.md" in qmd.run("search", "--format", "json", "redis")
    assert "0 new, 0 updated, 2 unchanged, 0 removed" in qmd.run("update")

    # the original edits a document and knows nothing of its rows: we never serve them stale
    (notes / "auth.md").write_text("# Auth\n\n## Keys\n\nKeys rotate daily.\n", encoding="utf-8")
    assert "1 updated" in qmd.run("update")
    app = build_app(env=env, with_models=False)
    try:
        assert app.chunks is not None and app.chunk_keeper is not None
        with pytest.raises(QmdError, match="No chunks"):
            app.chunks.get("notes/auth.md")
        app.chunk_keeper.sync()
        assert [r.heading_path for r in app.chunks.get("notes/auth.md")] == ["Auth", "Auth > Keys"]
    finally:
        app.close()
    assert "Keys rotate daily." in qmd.run("get", "qmd://notes/auth.md")
