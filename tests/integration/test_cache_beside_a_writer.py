"""The LLM cache is best effort: while another process holds the index's write lock (a long
`qmd update`), a cache write gives up after the busy timeout instead of failing the search it
belongs to."""

from __future__ import annotations

from pathlib import Path

from adapters.sqlite.driver import connect
from adapters.sqlite.store import SqliteIndex


def test_a_cache_write_under_another_writer_is_skipped_not_raised(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    index = SqliteIndex.open(db, {"QMD_SQLITE_BUSY_TIMEOUT": "50"})
    writer = connect(db)
    try:
        writer.raw.execute("BEGIN IMMEDIATE")
        index.put("expansion:q", "cached")  # waits 50 ms, then gives up quietly
        assert index.get("expansion:q") is None
        writer.raw.execute("COMMIT")
        index.put("expansion:q", "cached")
        assert index.get("expansion:q") == "cached"
    finally:
        writer.close()
        index.close()
