"""`qmd update` records document metadata, keeps it in step with the folder, and filters
reach documents ranked beyond any top-k window in every search mode (REQ-META-001..002,
REQ-FILTER-003). Real SQLite index and file system."""

from __future__ import annotations

import os
from pathlib import Path

from adapters.bootstrap import App
from adapters.fs.content_source import FileSystemSource
from adapters.sqlite.metadata import METADATA_TABLE
from adapters.sqlite.store import SqliteIndex
from domain.filters import Not, since, tagged
from domain.model import SubQuery
from domain.usecases.search import SearchRequest
from tests.fakes import FixedClock, InMemoryConfigRepository


def _app(tmp_path: Path) -> tuple[App, SqliteIndex]:
    index = SqliteIndex.open(tmp_path / "index.sqlite")
    app = App(
        store=index,
        lexical=index,
        vectors=index,
        cache=index,
        config=InMemoryConfigRepository(),
        source=FileSystemSource(),
        clock=FixedClock(),
        maintenance=index,
        metadata_index=index,
    )
    return app, index


def _write(folder: Path, name: str, text: str, mtime: float | None = None) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))


FRONT = "---\n" + "date: 2024-03-05\ntags: [ops, redis]\nauthor: Ana\n"
FRONT += "reviewed: true\nnested: {a: 1}\n---\n"


def test_update_records_and_maintains_metadata(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    _write(notes, "a.md", FRONT + "# A\n\nredis\n", mtime=1_700_000_000)
    _write(notes, "sub/b.markdown.MD", "# B\n\nplain\n")
    app, index = _app(tmp_path)
    try:
        app.collections.add(str(notes), "n", pattern="**/*.{md,MD}")
        by_path = {m.path: m.id for m in app.store.documents()}
        stored = index.metadata_by_id(list(by_path.values()))
        a = stored[by_path["a.md"]]
        assert a == {
            "format": "md",
            "size": len((FRONT + "# A\n\nredis\n").encode()),
            "modified": "2023-11-14T22:13:20.000Z",
            "date": "2024-03-05",
            "tags": ("ops", "redis"),
            "author": "Ana",
            "reviewed": True,
        }  # the nested map is not a filterable value and is left out
        assert stored[by_path["sub/b.markdown.MD"]]["format"] == "md"
        # an edit re-records, an extractor's fields merge in, front matter wins over them
        _write(notes, "a.md", "---\nauthor: Bo\n---\n# A\n\nredis again\n")
        manager = app.collections
        manager.index(manager.get("n"), extra_metadata={"a.md": {"author": "X", "pages": 3}})
        a = index.metadata_by_id([by_path["a.md"]])[by_path["a.md"]]
        assert a["author"] == "Bo" and a["pages"] == 3 and "tags" not in a
        # a removed file leaves the filterable set; cleanup drops its row
        (notes / "sub" / "b.markdown.MD").unlink()
        app.collections.update()
        assert [i for i, _ in index.active_metadata(None)] == [by_path["a.md"]]
        index.cleanup()
        rows = index.connection.query(f"SELECT doc_id FROM {METADATA_TABLE}")
        assert [int(r[0]) for r in rows] == [by_path["a.md"]]
        app.collections.remove("n")
        assert index.connection.query(f"SELECT doc_id FROM {METADATA_TABLE}") == []
    finally:
        index.close()


def test_filters_reach_beyond_every_ranking_window(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    for i in range(60):  # sixty documents about caching; the tagged one ranks last
        _write(notes, f"n{i:02d}.md", f"# Note {i}\n\n" + "cache " * (60 - i) + "entry\n")
    _write(notes, "tagged.md", "---\ntags: [rare]\ndate: 2020-01-01\n---\n# T\n\ncache entry\n")
    app, index = _app(tmp_path)
    try:
        app.collections.add(str(notes), "n")
        services = app.services()
        assert services.metadata is not None
        within = services.metadata.scope(tagged(["rare"]))
        assert within is not None and len(within) == 1
        searcher = app.searcher
        plain = searcher.lex_search("cache", SearchRequest(limit=5))
        assert all(r.document.meta.path != "tagged.md" for r in plain)
        request = SearchRequest(limit=1, within=within)
        assert [r.document.meta.path for r in searcher.lex_search("cache", request)] == [
            "tagged.md"
        ]
        hybrid = searcher.hybrid_query("cache", SearchRequest(limit=1, within=within))
        assert [r.document.meta.path for r in hybrid] == ["tagged.md"]
        typed = searcher.structured_query([SubQuery("lex", "cache")], request)
        assert [r.document.meta.path for r in typed] == ["tagged.md"]
        old = services.metadata.scope(Not(since("2021-01-01")))
        assert old == within
    finally:
        index.close()


def test_tag_finds_jekyll_categories_in_a_real_index(tmp_path: Path) -> None:
    """REQ-FILTER-TAG-001 through SQLite's metadata index: a blog post that files itself under
    `categories` (Jekyll) or `category` is found by `--tag`, like one with `tags`."""
    posts = tmp_path / "posts"
    _write(posts, "a.md", "---\ncategories: [release, node]\n---\n# A\n\nnotes\n")
    _write(posts, "b.md", "---\ncategory: release\n---\n# B\n\nnotes\n")
    _write(posts, "c.md", "---\ntags: [release]\n---\n# C\n\nnotes\n")
    _write(posts, "d.md", "---\ntags: [other]\n---\n# D\n\nnotes\n")
    app, index = _app(tmp_path)
    try:
        app.collections.add(str(posts), "p")
        services = app.services()
        assert services.metadata is not None
        by_id = {m.id: m.path for m in app.store.documents()}
        within = services.metadata.scope(tagged(["release"]))
        assert within is not None and sorted(by_id[i] for i in within) == ["a.md", "b.md", "c.md"]
        both = services.metadata.scope(tagged(["release", "node"]))
        assert both is not None and [by_id[i] for i in both] == ["a.md"]
    finally:
        index.close()
