"""`SqliteFileStamps`: each indexed file's stamp as an update last read it (REQ-INDEX-NOOP-001),
in a table of our own inside the index file.

The original QMD 2.8.3 never reads tables it does not know, so it still opens and updates an
index holding this one. The table is created by the first write, not on open, so opening an
index the original wrote leaves its schema as it was. Rows are keyed by (collection, path) and
carry the content hash and title they were indexed as; `domain.stamps.can_skip` trusts a row
only while the active document still has both, so a row left behind by another program's
update, a copy of the index or a removed collection is simply not used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adapters.sqlite.driver import Connection
from domain.indexing import FileStamp
from domain.stamps import RecordedStamp

STAMPS_TABLE = "py_file_stamps"
STAMPS_DDL = f"""
    CREATE TABLE IF NOT EXISTS {STAMPS_TABLE} (
      collection TEXT NOT NULL,
      path TEXT NOT NULL,
      size INTEGER NOT NULL,
      mtime_ns INTEGER NOT NULL,
      ctime_ns INTEGER NOT NULL,
      inode INTEGER NOT NULL,
      scan_started_ns INTEGER NOT NULL,
      hash TEXT NOT NULL,
      title TEXT NOT NULL,
      reader TEXT NOT NULL DEFAULT '',
      PRIMARY KEY (collection, path)
    ) WITHOUT ROWID
  """


class SqliteFileStamps:
    """`FileStampIndex` over the index file's connection."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def _exists(self) -> bool:
        found = self._conn.scalar(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (STAMPS_TABLE,)
        )
        return found is not None

    def file_stamps(self, collection: str) -> dict[str, RecordedStamp]:
        if not self._exists():
            return {}
        rows = self._conn.query(
            f"SELECT path, size, mtime_ns, ctime_ns, inode, scan_started_ns, hash, title, reader "
            f"FROM {STAMPS_TABLE} WHERE collection = ?",
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
        with self._conn.transaction():
            self._conn.execute(STAMPS_DDL)
            self._conn.executemany(
                f"INSERT OR REPLACE INTO {STAMPS_TABLE} (collection, path, size, mtime_ns, "
                "ctime_ns, inode, scan_started_ns, hash, title, reader) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        collection,
                        path,
                        r.stamp.size,
                        r.stamp.mtime_ns,
                        r.stamp.ctime_ns,
                        r.stamp.inode,
                        r.scan_started_ns,
                        r.hash,
                        r.title,
                        r.reader,
                    )
                    for path, r in stamps.items()
                ],
            )

    def forget_file_stamps(self, collection: str, paths: Sequence[str] | None = None) -> None:
        if not self._exists():
            return
        with self._conn.transaction():
            if paths is None:
                self._conn.execute(
                    f"DELETE FROM {STAMPS_TABLE} WHERE collection = ?", (collection,)
                )
                return
            self._conn.executemany(
                f"DELETE FROM {STAMPS_TABLE} WHERE collection = ? AND path = ?",
                [(collection, path) for path in paths],
            )

    def rename_file_stamps(self, old: str, new: str) -> None:
        if not self._exists() or old == new:
            return
        with self._conn.transaction():
            self._conn.execute(f"DELETE FROM {STAMPS_TABLE} WHERE collection = ?", (new,))
            self._conn.execute(
                f"UPDATE {STAMPS_TABLE} SET collection = ? WHERE collection = ?", (new, old)
            )
