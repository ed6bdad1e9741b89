"""Document metadata in a table of our own (REQ-META-004).

The original 2.8.3 never reads or writes `py_document_metadata`, so an index holding it still
opens and serves in the original. The table is created by the first write, so merely opening
an index (the original's, say) leaves its schema exactly as it was. Rows are keyed by
`documents.id`, which survives re-indexing, deactivation and collection renames; rows whose
document is gone are removed by `cleanup`, and every read joins the active documents, so a
stale row is never seen.

`py_metadata_values` lists each document's (key, kind, value) pairs, a list field one row per
item, behind an index on (key, kind, value): a filter's candidates are read from it
(REQ-FILTER-009) instead of decoding every document's metadata. Triggers on the metadata table
keep it, so every writer (this version, an older one, `index copy`) keeps it current; an
index made before it gets it, filled from the stored rows, on its next metadata write.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from adapters.sqlite.driver import Connection, ConnectionPart
from adapters.storage.sql_rows import metadata_from_text, metadata_text
from domain.model import metadata_from_json

# the filter code (domain.filters) is imported with the first filtered search: the index
# opens with this part, and a command that filters nothing (`qmd search`) never loads it
if TYPE_CHECKING:
    from domain.filters import MetaValue, Probe

METADATA_TABLE = "py_document_metadata"
METADATA_DDL = f"""
    CREATE TABLE IF NOT EXISTS {METADATA_TABLE} (
      doc_id INTEGER PRIMARY KEY,
      metadata TEXT NOT NULL
    )
  """
ID_CHUNK = 500
VALUES_TABLE = "py_metadata_values"
# kinds keep JSON's types apart (REQ-FILTER-002): 0 text, 1 number, 2 boolean, 3 any other
# (a key holding an empty list or a value no filter can equal)
_PAIRS = """
  SELECT {doc}, e.key,
    CASE CASE WHEN e.type = 'array' THEN a.type ELSE e.type END
      WHEN 'text' THEN 0 WHEN 'integer' THEN 1 WHEN 'real' THEN 1
      WHEN 'true' THEN 2 WHEN 'false' THEN 2 ELSE 3 END,
    CASE WHEN e.type = 'array' THEN a.value ELSE e.value END
  FROM json_each({metadata}) e
  LEFT JOIN json_each(CASE WHEN e.type = 'array' THEN e.value ELSE '[]' END) a
"""
VALUES_DDL = (
    f"""CREATE TABLE IF NOT EXISTS {VALUES_TABLE} (
      doc_id INTEGER NOT NULL, key TEXT NOT NULL, kind INTEGER NOT NULL, value)""",
    f"CREATE INDEX IF NOT EXISTS idx_{VALUES_TABLE} ON {VALUES_TABLE} (key, kind, value)",
    f"CREATE INDEX IF NOT EXISTS idx_{VALUES_TABLE}_doc ON {VALUES_TABLE} (doc_id)",
    # INSERT OR REPLACE fires no DELETE trigger: the insert clears the old pairs itself
    f"""CREATE TRIGGER IF NOT EXISTS {VALUES_TABLE}_insert AFTER INSERT ON {METADATA_TABLE}
    BEGIN
      DELETE FROM {VALUES_TABLE} WHERE doc_id = new.doc_id;
      INSERT INTO {VALUES_TABLE} (doc_id, key, kind, value)
      {_PAIRS.format(doc="new.doc_id", metadata="new.metadata")};
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS {VALUES_TABLE}_update AFTER UPDATE ON {METADATA_TABLE}
    BEGIN
      DELETE FROM {VALUES_TABLE} WHERE doc_id = old.doc_id;
      INSERT INTO {VALUES_TABLE} (doc_id, key, kind, value)
      {_PAIRS.format(doc="new.doc_id", metadata="new.metadata")};
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS {VALUES_TABLE}_delete AFTER DELETE ON {METADATA_TABLE}
    BEGIN
      DELETE FROM {VALUES_TABLE} WHERE doc_id = old.doc_id;
    END""",
)


def ensure_metadata_table(conn: Connection) -> None:
    conn.execute(METADATA_DDL)
    ensure_values_table(conn)
    # known from now on: lexical search reads each hit's metadata with it (adapters/sqlite/
    # lexical.py, which forgets the name again if the write that made it rolls back)
    conn.schema_names = conn.schema_names | {METADATA_TABLE}


def _probe(conn: Connection, name: str) -> bool:
    return (
        conn.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
        is not None
    )


def has_values_table(conn: Connection) -> bool:
    return _probe(conn, VALUES_TABLE)


def ensure_values_table(conn: Connection) -> None:
    """Create the pairs table and its triggers, filled from the rows already stored."""
    if has_values_table(conn):
        return
    for statement in VALUES_DDL:
        conn.execute(statement)
    conn.execute(
        f"INSERT INTO {VALUES_TABLE} (doc_id, key, kind, value) "
        + _PAIRS.format(doc="m.doc_id", metadata="m.metadata").replace(
            "FROM json_each", f"FROM {METADATA_TABLE} m, json_each", 1
        )
        + " WHERE json_valid(m.metadata)"
    )


def has_metadata_table(conn: Connection) -> bool:
    """Answered from the connection's known schema once the table is seen: it is never
    dropped. An absent table is probed each time: another process may create it. (Lexical
    search asks the known schema alone, adapters/sqlite/lexical.py: its hits then carry no
    metadata, and the read by id for the results shown comes here and looks again.)"""
    if METADATA_TABLE in conn.schema_names:
        return True
    found = _probe(conn, METADATA_TABLE)
    if found:
        conn.schema_names = conn.schema_names | {METADATA_TABLE}
    return found


def _kind_value(value: object) -> tuple[int, object]:
    if isinstance(value, bool):
        return 2, int(value)
    if isinstance(value, str):
        return 0, value
    return 1, value


def _probe_sql(probe: Probe, params: list[Any]) -> str:
    """`probe` as a condition on `d.id` over the pairs table."""
    from domain.filters import AllOf, HasKey, HasValue

    if isinstance(probe, HasValue):
        kind, value = _kind_value(probe.value)
        params += [probe.key, kind, value]
        return (
            f"d.id IN (SELECT doc_id FROM {VALUES_TABLE} WHERE key = ? AND kind = ? AND value = ?)"
        )
    if isinstance(probe, HasKey):
        params.append(probe.key)
        return f"d.id IN (SELECT doc_id FROM {VALUES_TABLE} WHERE key = ?)"
    if not probe.probes:
        return "1" if isinstance(probe, AllOf) else "0"
    joiner = " AND " if isinstance(probe, AllOf) else " OR "
    return "(" + joiner.join(_probe_sql(part, params) for part in probe.probes) + ")"


def delete_orphaned_metadata(conn: Connection) -> int:
    """Rows whose document row no longer exists (after cleanup or a collection removal)."""
    if not has_metadata_table(conn):
        return 0
    return int(
        conn.execute(
            f"DELETE FROM {METADATA_TABLE} WHERE doc_id NOT IN (SELECT id FROM documents)"
        ).rowcount
    )


class SqliteMetadata(ConnectionPart):
    """MetadataIndex on the index file's connection, as adapters/postgres/metadata.py is on
    PostgreSQL."""

    def put_metadata(self, collection: str, path: str, metadata: Mapping[str, MetaValue]) -> None:
        conn = self._conn
        encoded = metadata_text(metadata)
        if not has_metadata_table(conn):
            ensure_metadata_table(conn)
        else:
            ensure_values_table(conn)
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

    def put_metadata_many(
        self, collection: str, entries: Sequence[tuple[str, Mapping[str, MetaValue]]]
    ) -> None:
        with self._conn.transaction():
            for path, metadata in entries:
                self.put_metadata(collection, path, metadata)

    def active_metadata(
        self, collections: Sequence[str] | None, narrowing: Probe | None = None
    ) -> list[tuple[int, dict[str, MetaValue]]]:
        """Every active document's metadata (with `narrowing`, those meeting it, read through the
        pairs table when the index has one), fetched as ONE JSON array built by SQLite and decoded
        by one `json.loads` (per-row decoding was most of a filtered search's cost)."""
        conn = self._conn
        joined = has_metadata_table(conn)
        value = "COALESCE(m.metadata, '{}')" if joined else "'{}'"
        source = (
            f"documents d LEFT JOIN {METADATA_TABLE} m ON m.doc_id = d.id"
            if joined
            else "documents d"
        )
        sql = (
            f"SELECT '[' || group_concat('[' || d.id || ',' || {value} || ']', ',') || ']' "
            f"FROM {source} WHERE d.active = 1"
        )
        params: list[Any] = []
        if collections is not None:
            sql += " AND d.collection IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(collections)))
        if narrowing is not None and joined and has_values_table(conn):
            sql += " AND " + _probe_sql(narrowing, params)
        text = conn.scalar(sql, params)
        if text is None:
            return []
        try:
            rows = json.loads(str(text))
        except ValueError:
            return []
        return [
            (int(doc_id), metadata_from_json(raw) if isinstance(raw, dict) else {})
            for doc_id, raw in rows
        ]

    def metadata_by_id(self, ids: Sequence[int]) -> dict[int, dict[str, MetaValue]]:
        conn = self._conn
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
                found[int(doc_id)] = metadata_from_text(text)
        return found
