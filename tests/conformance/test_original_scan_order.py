"""The original's index order, as the suite builds it, is the one REQ-TOOL-MGET-009 states.

The original inserts documents in the order its fast-glob walk finds them, and that walk reads
sibling folders concurrently on libuv's thread pool: with the default four threads a folder
read that finishes early puts its files first, so `journal/*` and `meetings/*` (or `中文笔记/*`
and `engineering/api/*`) swap in about one indexing in ten, and every golden that prints
`documents.id` order (multi_get globs first) flips with it. The original profiles run their
`collection add` with one worker thread, so reads finish in the order they were queued. These
builds, several at once to add scheduling noise, must all give the spec's breadth-first order.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import pytest

from conformance import fixture, profiles

BUILDS = 20
AT_ONCE = 4


def spec_order(root: Path, mask_suffix: str) -> list[str]:
    """REQ-TOOL-MGET-009 from the tree itself: a folder's files (names as UTF-8 bytes) before
    its subfolders', folders in the order they were found; hidden names and empty files are
    not indexed."""
    out: list[str] = []
    folders: deque[Path] = deque([root])
    while folders:
        folder = folders.popleft()
        for entry in sorted(folder.iterdir(), key=lambda p: p.name.encode("utf-8")):
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                folders.append(entry)
            elif entry.name.endswith(mask_suffix) and entry.read_text(encoding="utf-8").strip():
                out.append(entry.relative_to(root).as_posix())
    return out


def build_and_read(
    base: Path, profile: profiles.Profile, qmd: str, path_dirs: list[str]
) -> list[tuple[str, str]]:
    """One scratch copy indexed by the profile's own `collection add` steps; the documents in
    id order."""
    base.mkdir()
    scratch = fixture.make_scratch(base, fixture.default_fixtures_dir())
    env = fixture.server_env(scratch, profile, path_dirs)
    steps = [
        argv for kind, argv in fixture.setup_steps(scratch, profile, qmd) if kind == "collection"
    ]
    assert len(steps) == len(scratch.setup["collections"]) >= 2
    for argv in steps:
        proc = subprocess.run(
            argv, env=env, cwd=scratch.root, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    with closing(sqlite3.connect(scratch.index)) as db:
        return [(c, p) for c, p in db.execute("SELECT collection, path FROM documents ORDER BY id")]


@pytest.mark.original
def test_every_build_of_the_originals_index_is_in_the_spec_scan_order(
    original: tuple[str, list[str]], tmp_path: Path
) -> None:
    qmd, path_dirs = original
    profile = profiles.load("original-2.8.3")
    # the model-backed goldens index the same corpora, so that profile scans the same way
    assert profiles.load("original-2.8.3-models").setup["collection"] == profile.setup["collection"]
    setup = json.loads((fixture.default_fixtures_dir() / "setup.json").read_text(encoding="utf-8"))
    expected: list[tuple[str, str]] = []
    for coll in setup["collections"]:
        assert coll["mask"] == "**/*.md"
        root = fixture.default_fixtures_dir() / coll["path"]
        expected += [(coll["name"], p) for p in spec_order(root, ".md")]
    # the fixture has what makes the order matter: sibling folders and deeper ones
    assert ("handbook", "journal/2026-01.md") in expected
    assert ("handbook", "engineering/api/v2/endpoints (draft).md") in expected

    with ThreadPoolExecutor(AT_ONCE) as pool:
        orders = list(
            pool.map(
                lambda i: build_and_read(tmp_path / f"build{i}", profile, qmd, path_dirs),
                range(BUILDS),
            )
        )
    differing = [order for order in orders if order != expected]
    if differing:
        first = differing[0]
        pairs = enumerate(zip(first, expected, strict=False))
        at = next((i for i, (got, want) in pairs if got != want), min(len(first), len(expected)))
        pytest.fail(
            f"{len(differing)} of {BUILDS} builds left the spec order; the first at #{at}: "
            f"got {first[at : at + 4]}, want {expected[at : at + 4]}"
        )
