"""The kept dataclass methods (adapters/cli/method_cache.py) stay bounded: texts the code no
longer makes age out, and other Python builds' files do not pile up (issue 35)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from adapters.cli.method_cache import KEEP_GENERATIONS, MAX_BUILDS, cache_file, cached_methods


def _run(folder: Path, version: int) -> int:
    """One `qmd` run of a code base at `version`: a class that never changes and one whose
    text changes with every version (a field renamed). How many texts it compiled."""
    with cached_methods(str(folder)) as cache:
        dataclasses.make_dataclass("Stable", [("name", str)], frozen=True)
        dataclasses.make_dataclass("Changing", [(f"field_{version}", int)], frozen=True)
    return cache.compiled


def test_texts_no_run_uses_any_more_are_dropped_and_the_file_stops_growing(
    tmp_path: Path,
) -> None:
    sizes = []
    for version in range(4 * KEEP_GENERATIONS):
        assert _run(tmp_path, version) > 0  # the changed class is compiled once
        sizes.append(os.path.getsize(cache_file(str(tmp_path))))
    # a class unchanged since the first run is still kept: it compiles nothing
    with cached_methods(str(tmp_path)) as cache:
        dataclasses.make_dataclass("Stable", [("name", str)], frozen=True)
    assert cache.compiled == 0
    # the first version's texts were dropped long ago
    with cached_methods(str(tmp_path)) as cache:
        dataclasses.make_dataclass("Changing", [("field_0", int)], frozen=True)
    assert cache.compiled > 0
    # the file holds a bounded number of versions, not every one there ever was
    assert sizes[-1] <= sizes[KEEP_GENERATIONS + 1] * 1.2, sizes


def test_only_the_most_recently_written_builds_files_are_kept(tmp_path: Path) -> None:
    others = [tmp_path / f"dataclass-methods-cpython-00-{n:08x}.marshal" for n in range(5)]
    for age, path in enumerate(others):
        path.write_bytes(b"")
        when = 1_000_000 + age  # the last one written most recently
        os.utime(path, (when, when))
    unrelated = tmp_path / "config-parsed.json"
    unrelated.write_text("{}", encoding="utf-8")
    assert _run(tmp_path, 1) > 0
    left = sorted(p.name for p in tmp_path.glob("dataclass-methods-*.marshal"))
    newest_others = sorted(p.name for p in others[-(MAX_BUILDS - 1) :])
    assert left == sorted([Path(cache_file(str(tmp_path))).name, *newest_others])
    assert unrelated.exists()


def test_a_file_of_the_earlier_format_is_compiled_around(tmp_path: Path) -> None:
    import marshal

    path = Path(cache_file(str(tmp_path)))
    path.write_bytes(marshal.dumps({"not": compile("x = 1", "<string>", "exec")}))
    assert _run(tmp_path, 1) > 0
    assert _run(tmp_path, 1) == 0
