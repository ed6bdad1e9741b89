"""Document metadata in a table of our own (REQ-META-004).

The original 2.8.3 never reads or writes `py_document_metadata`, so an index holding it still
opens and serves in the original. The table is created by the first write, so merely opening
an index (the original's, say) leaves its schema exactly as it was. Rows are keyed by
`documents.id`, which survives re-indexing, deactivation and collection renames; rows whose
document is gone are removed by `cleanup`, and every read joins the active documents, so a
stale row is never seen.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.sqlite.driver import Connection
from domain.filters import MetaValue
from domain.metadata import as_json, from_json

METADATA_TABLE = "py_document_metadata"
METADATA_DDL = f"""
    CREATE TABLE IF NOT EXISTS {METADATA_TABLE} (
      doc_id INTEGER PRIMARY KEY,
      metadata TEXT NOT NULL
    )
  """
ID_CHUNK = 500


def ensure_metadata_table(conn: Connection) -> None:
    conn.execute(METADATA_DDL)


def has_metadata_table(conn: Connection) -> bool:
    return (
        conn.scalar(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (METADATA_TABLE,)
        )
        is not None
    )


def _decode(text: Any) -> dict[str, MetaValue]:
    try:
        raw = json.loads(str(text))
    except ValueError:
        return {}
    return from_json(raw) if isinstance(raw, dict) else {}


def put_metadata(
    conn: Connection, collection: str, path: str, metadata: Mapping[str, MetaValue]
) -> None:
    encoded = json.dumps(as_json(metadata), ensure_ascii=False, separators=(",", ":"))
    if not has_metadata_table(conn):
        ensure_metadata_table(conn)
    row = conn.raw.execute(
        f"SELECT d.id, m.metadata FROM documents d LEFT JOIN {METADATA_TABLE} m "
        "ON m.doc_id = d.id WHERE d.collection = ? AND d.path = ? AND d.active = 1",
        (collection, path),
    ).fetchone()
    if row is None or row[1] == encoded:
        return
    conn.execute(
        f"INSERT OR REPLACE INTO {METADATA_TABLE} (doc_id, metadata) VALUES (?, ?)",
        (int(row[0]), encoded),
    )


def active_metadata(
    conn: Connection, collections: Sequence[str] | None
) -> list[tuple[int, dict[str, MetaValue]]]:
    """Every active document's metadata, fetched as ONE JSON array built by SQLite and decoded
    by one `json.loads` (a filtered search reads them all; per-row decoding was most of it)."""
    joined = has_metadata_table(conn)
    value = "COALESCE(m.metadata, '{}')" if joined else "'{}'"
    source = (
        f"documents d LEFT JOIN {METADATA_TABLE} m ON m.doc_id = d.id" if joined else "documents d"
    )
    sql = (
        f"SELECT '[' || group_concat('[' || d.id || ',' || {value} || ']', ',') || ']' "
        f"FROM {source} WHERE d.active = 1"
    )
    params: list[Any] = []
    if collections is not None:
        sql += " AND d.collection IN (SELECT value FROM json_each(?))"
        params.append(json.dumps(list(collections)))
    text = conn.scalar(sql, params)
    if text is None:
        return []
    try:
        rows = json.loads(str(text))
    except ValueError:
        return []
    return [(int(doc_id), from_json(raw) if isinstance(raw, dict) else {}) for doc_id, raw in rows]


def metadata_by_id(conn: Connection, ids: Sequence[int]) -> dict[int, dict[str, MetaValue]]:
    found: dict[int, dict[str, MetaValue]] = {}
    if not has_metadata_table(conn):
        return found
    wanted = sorted({int(i) for i in ids})
    for start in range(0, len(wanted), ID_CHUNK):
        part = wanted[start : start + ID_CHUNK]
        for doc_id, text in conn.query(
            f"SELECT doc_id, metadata FROM {METADATA_TABLE} "
            f"WHERE doc_id IN ({','.join('?' * len(part))})",
            part,
        ):
            found[int(doc_id)] = _decode(text)
    return found


def delete_orphaned_metadata(conn: Connection) -> int:
    """Rows whose document row no longer exists (after cleanup or a collection removal)."""
    if not has_metadata_table(conn):
        return 0
    return int(
        conn.execute(
            f"DELETE FROM {METADATA_TABLE} WHERE doc_id NOT IN (SELECT id FROM documents)"
        ).rowcount
    )
