"""FileStampIndex contract (REQ-INDEX-NOOP-001) for InMemoryFileStamps, SqliteFileStamps and
the PostgreSQL index (adapters/postgres/stamps.py).

The SQLite table is created by the first write only: an index the original QMD wrote keeps
its schema until an update records a stamp. PostgreSQL makes its table with the schema
(migration 11).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.postgres.store import PostgresIndex
from adapters.sqlite.stamps import STAMPS_TABLE, SqliteFileStamps
from adapters.sqlite.store import SqliteIndex
from domain.indexing import FileStamp
from domain.stamps import RecordedStamp
from tests.backend_locations import BACKENDS, opened_backend
from tests.fakes import InMemoryFileStamps

Stamps = InMemoryFileStamps | SqliteFileStamps | PostgresIndex


def _recorded(size: int, title: str = "T") -> RecordedStamp:
    return RecordedStamp(
        FileStamp(size, 10**18 + size, 10**18 + 2 * size, 2**40 + size), 7, "h", title
    )


@pytest.fixture(params=[*BACKENDS])
def stamps(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stamps]:
    with opened_backend(request.param, tmp_path) as backend:
        assert backend.stamps is not None, "every registered backend keeps file stamps"
        yield backend.stamps


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


def test_a_stamp_keeps_every_field_at_its_full_range(stamps: Stamps) -> None:
    """Nanosecond times past 2**62 and an inode past 2**62."""
    wide = RecordedStamp(FileStamp(2**40, 2**62 + 1, 2**62 + 3, 2**63 - 1), 2**62, "h", "é")
    stamps.record_file_stamps("c", {"ü/a.md": wide})
    assert stamps.file_stamps("c") == {"ü/a.md": wide}


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
