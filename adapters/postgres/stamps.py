"""File stamps on PostgreSQL (the FileStampIndex port, REQ-INDEX-NOOP-001): each indexed file's
stamp as an update last read it, in `py_file_stamps` (migration 11), the same columns as the
SQLite table (adapters/sqlite/stamps.py).

Rows are keyed by (collection, path) and carry the content hash and title they were indexed
as; `domain.stamps.can_skip` trusts a row only while the active document still has both, so a
row left behind by a copy of the index or a removed collection is simply not used. Stamps
describe this machine's files: `qmd index copy` never copies them (LOCAL_TABLES).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adapters.postgres.connection import PgConnections
from domain.indexing import FileStamp
from domain.stamps import RecordedStamp

STAMPS_TABLE = "py_file_stamps"

# One statement for a whole update's stamps: the rows travel as ten arrays, so recording
# 10,000 stamps is one round trip, not 10,000.
_RECORD = (
    f"INSERT INTO {STAMPS_TABLE} (collection, path, size, mtime_ns, ctime_ns, inode, "
    "scan_started_ns, hash, title, reader) "
    "SELECT %s, * FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::bigint[], "
    "%s::numeric[], %s::bigint[], %s::text[], %s::text[], %s::text[]) "
    "ON CONFLICT (collection, path) DO UPDATE SET size = excluded.size, "
    "mtime_ns = excluded.mtime_ns, ctime_ns = excluded.ctime_ns, inode = excluded.inode, "
    "scan_started_ns = excluded.scan_started_ns, hash = excluded.hash, "
    "title = excluded.title, reader = excluded.reader"
)


class PgFileStamps(PgConnections):
    """FileStampIndex over the pool."""

    def file_stamps(self, collection: str) -> dict[str, RecordedStamp]:
        rows = self._query(
            f"SELECT path, size, mtime_ns, ctime_ns, inode, scan_started_ns, hash, title, "
            f"reader FROM {STAMPS_TABLE} WHERE collection = %s",
            (collection,),
        )
        return {
            str(path): RecordedStamp(
                FileStamp(int(size), int(mtime), int(ctime), int(inode)),
                int(started),
                str(content_hash),
                str(title),
                str(reader),
            )
            for path, size, mtime, ctime, inode, started, content_hash, title, reader in rows
        }

    def record_file_stamps(self, collection: str, stamps: Mapping[str, RecordedStamp]) -> None:
        if not stamps:
            return
        items = list(stamps.items())
        self._execute(
            _RECORD,
            (
                collection,
                [path for path, _ in items],
                [r.stamp.size for _, r in items],
                [r.stamp.mtime_ns for _, r in items],
                [r.stamp.ctime_ns for _, r in items],
                [r.stamp.inode for _, r in items],
                [r.scan_started_ns for _, r in items],
                [r.hash for _, r in items],
                [r.title for _, r in items],
                [r.reader for _, r in items],
            ),
        )

    def forget_file_stamps(self, collection: str, paths: Sequence[str] | None = None) -> None:
        if paths is None:
            self._execute(f"DELETE FROM {STAMPS_TABLE} WHERE collection = %s", (collection,))
            return
        if paths:
            self._execute(
                f"DELETE FROM {STAMPS_TABLE} WHERE collection = %s AND path = ANY(%s::text[])",
                (collection, list(paths)),
            )

    def rename_file_stamps(self, old: str, new: str) -> None:
        if old == new:
            return
        with self.transaction(), self._conn() as conn:
            conn.execute(f"DELETE FROM {STAMPS_TABLE} WHERE collection = %s", (new,))
            conn.execute(
                f"UPDATE {STAMPS_TABLE} SET collection = %s WHERE collection = %s", (new, old)
            )
