"""FileStampIndex contract (REQ-INDEX-NOOP-001) for InMemoryFileStamps and SqliteFileStamps.

PostgreSQL keeps no stamps (an update there reads every file), so it has no implementation
to hold to this contract. The SQLite table is created by the first write only: an index the
original QMD wrote keeps its schema until an update records a stamp.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.sqlite.stamps import STAMPS_TABLE, SqliteFileStamps
from adapters.sqlite.store import SqliteIndex
from domain.model import FileStamp
from domain.stamps import RecordedStamp
from tests.fakes import InMemoryFileStamps

Stamps = InMemoryFileStamps | SqliteFileStamps


def _recorded(size: int, title: str = "T") -> RecordedStamp:
    return RecordedStamp(
        FileStamp(size, 10**18 + size, 10**18 + 2 * size, 2**40 + size), 7, "h", title
    )


@pytest.fixture(params=["fake", "sqlite"])
def stamps(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stamps]:
    if request.param == "fake":
        yield InMemoryFileStamps()
        return
    index = SqliteIndex.open(tmp_path / "index.sqlite")
    try:
        yield SqliteFileStamps(index.connection)
    finally:
        index.close()


def test_stamps_are_kept_per_collection_and_path(stamps: Stamps) -> None:
    assert stamps.file_stamps("c") == {}
    stamps.record_file_stamps("c", {"a.md": _recorded(1), "d/b.md": _recorded(2)})
    stamps.record_file_stamps("other", {"a.md": _recorded(3)})
    stamps.record_file_stamps("c", {"a.md": _recorded(4, "new")})  # replaces
    assert stamps.file_stamps("c") == {"a.md": _recorded(4, "new"), "d/b.md": _recorded(2)}
    assert stamps.file_stamps("other") == {"a.md": _recorded(3)}


def test_forgetting_paths_or_a_whole_collection(stamps: Stamps) -> None:
    stamps.record_file_stamps("c", {"a.md": _recorded(1), "b.md": _recorded(2)})
    stamps.record_file_stamps("e", {"a.md": _recorded(3)})
    stamps.forget_file_stamps("c", ["a.md", "missing.md"])
    assert list(stamps.file_stamps("c")) == ["b.md"]
    stamps.forget_file_stamps("c")
    assert stamps.file_stamps("c") == {} and list(stamps.file_stamps("e")) == ["a.md"]


def test_renaming_moves_the_stamps_and_drops_what_the_new_name_had(stamps: Stamps) -> None:
    stamps.record_file_stamps("old", {"a.md": _recorded(1)})
    stamps.record_file_stamps("new", {"stale.md": _recorded(2)})
    stamps.rename_file_stamps("old", "new")
    assert stamps.file_stamps("old") == {}
    assert stamps.file_stamps("new") == {"a.md": _recorded(1)}


def test_the_sqlite_table_appears_only_with_the_first_stamp(tmp_path: Path) -> None:
    index = SqliteIndex.open(tmp_path / "index.sqlite")
    try:
        tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?"
        stamps = SqliteFileStamps(index.connection)
        stamps.forget_file_stamps("c")
        stamps.rename_file_stamps("c", "d")
        assert stamps.file_stamps("c") == {}
        assert index.connection.scalar(tables, (STAMPS_TABLE,)) is None
        stamps.record_file_stamps("c", {"a.md": _recorded(1)})
        assert index.connection.scalar(tables, (STAMPS_TABLE,)) == STAMPS_TABLE
    finally:
        index.close()
