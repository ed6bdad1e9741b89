"""Which file events concern a collection, and a watcher that survives a failed re-index."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from adapters.fs.watch import IndexWatcher, affected, wants
from domain.model import Collection


def test_wants_follows_mask_ignores_and_hidden_folders() -> None:
    notes = Collection("notes", "/n", pattern="**/*.md", ignore=("drafts/**",))
    assert wants(notes, "a.md") and wants(notes, "deep/er/b.md")
    assert not wants(notes, "a.txt")
    assert not wants(notes, "drafts/c.md")  # the collection's ignore
    assert not wants(notes, ".obsidian/d.md") and not wants(notes, "x/node_modules/e.md")


def test_affected_names_each_collection_once(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "sub").mkdir(parents=True)
    second.mkdir()
    (second / "c.txt").write_text("not a document")
    collections = [Collection("first", str(first)), Collection("second", str(second))]
    paths = [str(first / "a.md"), str(first / "b.md"), str(second / "c.txt")]
    assert affected(collections, paths) == ["first"]
    # a folder that appeared, or a path that vanished (a removed folder), may hide documents
    assert affected(collections, [str(first / "sub")]) == ["first"]
    assert affected(collections, [str(second / "gone")]) == ["second"]
    assert affected(collections, [str(tmp_path / "elsewhere.md")]) == []


@pytest.mark.slow  # waits on real time by design: left out of `make test-fast`
def test_a_failed_reindex_is_logged_and_the_next_change_is_indexed(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    calls: list[str] = []
    second_change = threading.Event()

    def reindex(name: str) -> None:
        calls.append(name)
        if len(calls) == 2:
            raise RuntimeError("disk hiccup")
        if len(calls) >= 3:
            second_change.set()

    watcher = IndexWatcher(lambda: [Collection("docs", str(folder))], reindex, debounce_ms=50)
    watcher.start()
    try:
        # the first pass re-indexes everything once (catching up), then changes count
        deadline = time.monotonic() + 10
        while not calls and time.monotonic() < deadline:
            time.sleep(0.05)
        assert calls == ["docs"]
        (folder / "one.md").write_text("one")
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.stats.failures == 1  # logged, and the watcher goes on
        (folder / "two.md").write_text("two")
        assert second_change.wait(10)
        assert watcher.stats.reindexed >= 2
    finally:
        watcher.stop()
