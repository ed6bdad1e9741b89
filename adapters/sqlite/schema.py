"""The original QMD 2.8.3 index schema, created idempotently on open.

The DDL strings keep the original's exact text (SQLite stores it verbatim in `sqlite_master`,
minus `IF NOT EXISTS`), so an index created here is indistinguishable from one the original
created, and opening an index the original wrote changes nothing in it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from adapters.sqlite.driver import Connection, DatabaseError
from adapters.storage.sql_vectors import mismatch
from domain.errors import UNAVAILABLE, QmdError

STORE_SCHEMA_VERSION = 1
FTS_CJK_NORMALIZED_VERSION = "1"

CONTENT_DDL = """
    CREATE TABLE IF NOT EXISTS content (
      hash TEXT PRIMARY KEY,
      doc TEXT NOT NULL,
      created_at TEXT NOT NULL
    )
  """

DOCUMENTS_DDL = """
    CREATE TABLE IF NOT EXISTS documents (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      collection TEXT NOT NULL,
      path TEXT NOT NULL,
      title TEXT NOT NULL,
      hash TEXT NOT NULL,
      created_at TEXT NOT NULL,
      modified_at TEXT NOT NULL,
      active INTEGER NOT NULL DEFAULT 1,
      FOREIGN KEY (hash) REFERENCES content(hash) ON DELETE CASCADE,
      UNIQUE(collection, path)
    )
  """

DOCUMENTS_INDEXES = (
    "CREATE INDEX IF NOT EXISTS idx_documents_collection ON documents(collection, active)",
    "CREATE INDEX IF NOT EXISTS idx_documents_hash ON documents(hash)",
    "CREATE INDEX IF NOT EXISTS idx_documents_path ON documents(path, active)",
)

LLM_CACHE_DDL = """
    CREATE TABLE IF NOT EXISTS llm_cache (
      hash TEXT PRIMARY KEY,
      result TEXT NOT NULL,
      created_at TEXT NOT NULL
    )
  """

CONTENT_VECTORS_DDL = """
    CREATE TABLE IF NOT EXISTS content_vectors (
      hash TEXT NOT NULL,
      seq INTEGER NOT NULL DEFAULT 0,
      pos INTEGER NOT NULL DEFAULT 0,
      model TEXT NOT NULL,
      embed_fingerprint TEXT NOT NULL DEFAULT '',
      total_chunks INTEGER NOT NULL DEFAULT 1,
      embedded_at TEXT NOT NULL,
      PRIMARY KEY (hash, seq)
    )
  """

CONTENT_VECTORS_INDEX = """
      CREATE INDEX IF NOT EXISTS idx_content_vectors_model_fingerprint
      ON content_vectors(model, embed_fingerprint, hash, total_chunks)
    """

STORE_COLLECTIONS_DDL = """
    CREATE TABLE IF NOT EXISTS store_collections (
      name TEXT PRIMARY KEY,
      path TEXT NOT NULL,
      pattern TEXT NOT NULL DEFAULT '**/*.md',
      ignore_patterns TEXT,
      include_by_default INTEGER DEFAULT 1,
      update_command TEXT,
      context TEXT
    )
  """

STORE_CONFIG_DDL = """
    CREATE TABLE IF NOT EXISTS store_config (
      key TEXT PRIMARY KEY,
      value TEXT
    )
  """

DOCUMENTS_FTS_DDL = """
  CREATE VIRTUAL TABLE IF NOT EXISTS documents_fts USING fts5(
    filepath, title, body,
    tokenize='porter unicode61'
  )
"""

TRIGGER_AI = """
    CREATE TRIGGER documents_ai AFTER INSERT ON documents
    WHEN new.active = 1
    BEGIN
      INSERT INTO documents_fts(rowid, filepath, title, body)
      SELECT
        new.id,
        new.collection || '/' || new.path,
        new.title,
        (SELECT doc FROM content WHERE hash = new.hash)
      WHERE new.active = 1;
    END
  """

TRIGGER_AD = """
    CREATE TRIGGER documents_ad AFTER DELETE ON documents BEGIN
      DELETE FROM documents_fts WHERE rowid = old.id;
    END
  """

TRIGGER_AU = """
    CREATE TRIGGER documents_au AFTER UPDATE ON documents
    BEGIN
      -- Delete from FTS if no longer active
      DELETE FROM documents_fts WHERE rowid = old.id AND new.active = 0;

      -- Update FTS if still/newly active
      INSERT OR REPLACE INTO documents_fts(rowid, filepath, title, body)
      SELECT
        new.id,
        new.collection || '/' || new.path,
        new.title,
        (SELECT doc FROM content WHERE hash = new.hash)
      WHERE new.active = 1;
    END
  """

VECTORS_VEC_DDL = (
    "CREATE VIRTUAL TABLE vectors_vec USING vec0(hash_seq TEXT PRIMARY KEY, "
    "embedding float[{dims}] distance_metric=cosine)"
)


def _user_version(conn: Connection) -> int:
    value = conn.scalar("PRAGMA user_version")
    return int(value or 0)


def _install_triggers(conn: Connection) -> None:
    for name, ddl in (
        ("documents_ai", TRIGGER_AI),
        ("documents_ad", TRIGGER_AD),
        ("documents_au", TRIGGER_AU),
    ):
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        conn.execute(ddl)


def _apply_triggers(conn: Connection) -> None:
    if _user_version(conn) >= STORE_SCHEMA_VERSION:
        return
    with conn.transaction():
        if _user_version(conn) < STORE_SCHEMA_VERSION:
            _install_triggers(conn)
            conn.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION}")


_TABLE_SQL = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?"


def _fts_exists(conn: Connection) -> bool:
    return conn.scalar(_TABLE_SQL, ("documents_fts",)) is not None


def _fts_is_current(conn: Connection) -> bool:
    sql = conn.scalar(_TABLE_SQL, ("documents_fts",))
    text = re.sub(r"\s+", "", str(sql or "")).lower()
    if "filepath" not in text or "title" not in text or "content=" in text:
        return False
    try:
        names = {str(row[1]).lower() for row in conn.query("PRAGMA table_info(documents_fts)")}
    except DatabaseError:
        names = set()
    return {"filepath", "title", "body"} <= names and "name" not in names


def _ensure_fts(conn: Connection) -> None:
    if _fts_is_current(conn):
        return
    with conn.transaction():
        if _fts_is_current(conn):
            return
        if _fts_exists(conn):
            # A legacy external-content table: replace it, the CJK rebuild refills it.
            for name in ("documents_ai", "documents_ad", "documents_au"):
                conn.execute(f"DROP TRIGGER IF EXISTS {name}")
            conn.execute("DROP TABLE IF EXISTS documents_fts")
            conn.execute(DOCUMENTS_FTS_DDL)
            conn.execute("DELETE FROM store_config WHERE key = 'fts_cjk_normalized_version'")
            if _user_version(conn) >= STORE_SCHEMA_VERSION:
                _install_triggers(conn)
        else:
            conn.execute(DOCUMENTS_FTS_DDL)


def _rebuild_fts_for_cjk(conn: Connection, normalize: Callable[[str], str]) -> None:
    version = conn.scalar("SELECT value FROM store_config WHERE key = 'fts_cjk_normalized_version'")
    if version == FTS_CJK_NORMALIZED_VERSION:
        return
    with conn.transaction():
        version = conn.scalar(
            "SELECT value FROM store_config WHERE key = 'fts_cjk_normalized_version'"
        )
        if version == FTS_CJK_NORMALIZED_VERSION:
            return
        rows = conn.query(
            "SELECT d.id, d.collection, d.path, d.title, content.doc FROM documents d "
            "JOIN content ON content.hash = d.hash WHERE d.active = 1 ORDER BY d.id"
        )
        conn.execute("DELETE FROM documents_fts")
        conn.executemany(
            "INSERT INTO documents_fts(rowid, filepath, title, body) VALUES (?, ?, ?, ?)",
            [
                (doc_id, normalize(f"{coll}/{path}"), normalize(title), normalize(body))
                for doc_id, coll, path, title, body in rows
            ],
        )
        conn.execute(
            "INSERT OR REPLACE INTO store_config(key, value) "
            "VALUES ('fts_cjk_normalized_version', ?)",
            (FTS_CJK_NORMALIZED_VERSION,),
        )


# Every name a current index has in sqlite_master (the original's schema).
CURRENT_NAMES = frozenset(
    {
        "content",
        "documents",
        "idx_documents_collection",
        "idx_documents_hash",
        "idx_documents_path",
        "llm_cache",
        "content_vectors",
        "idx_content_vectors_model_fingerprint",
        "store_collections",
        "store_config",
        "documents_fts",
        "documents_ai",
        "documents_ad",
        "documents_au",
    }
)
LEGACY_NAMES = frozenset({"path_contexts", "collections"})

# One statement says whether the file is current: every name, the FTS table's text, the
# schema version and the CJK version (a fresh file has no store_config: the query fails).
_PROBE = (
    "SELECT name, sql FROM sqlite_master "
    "UNION ALL SELECT '#user_version', user_version FROM pragma_user_version "
    "UNION ALL SELECT '#cjk', value FROM store_config WHERE key = 'fts_cjk_normalized_version'"
)


def _squeezed(sql: str) -> str:
    return re.sub(r"\s+", "", sql).lower().replace("ifnotexists", "")


def _probe(conn: Connection) -> bool:
    """True when the index is current, from one statement; records the names it saw."""
    try:
        rows = conn.query(_PROBE)
    except DatabaseError:
        return False
    found = {str(name): value for name, value in rows}
    conn.schema_names = frozenset(name for name in found if not name.startswith("#"))
    return (
        conn.schema_names >= CURRENT_NAMES
        and not LEGACY_NAMES & conn.schema_names
        and _squeezed(str(found["documents_fts"] or "")) == _squeezed(DOCUMENTS_FTS_DDL)
        and int(found.get("#user_version") or 0) >= STORE_SCHEMA_VERSION
        and found.get("#cjk") == FTS_CJK_NORMALIZED_VERSION
    )


def ensure_schema(conn: Connection, normalize_cjk: Callable[[str], str]) -> None:
    """Create or repair every table, index and trigger; on a current index one read-only
    statement (`_probe`) and nothing else."""
    if _probe(conn):
        return
    conn.execute("DROP TABLE IF EXISTS path_contexts")
    conn.execute("DROP TABLE IF EXISTS collections")
    conn.execute(CONTENT_DDL)
    conn.execute(DOCUMENTS_DDL)
    for ddl in DOCUMENTS_INDEXES:
        conn.execute(ddl)
    conn.execute(LLM_CACHE_DDL)
    conn.execute(CONTENT_VECTORS_DDL)
    try:
        conn.execute(CONTENT_VECTORS_INDEX)
    except DatabaseError as exc:
        # A legacy content_vectors without the newer columns: the original skips it too.
        if "no such column" not in str(exc).lower():
            raise
    conn.execute(STORE_COLLECTIONS_DDL)
    conn.execute(STORE_CONFIG_DDL)
    _ensure_fts(conn)
    _apply_triggers(conn)
    _rebuild_fts_for_cjk(conn, normalize_cjk)
    conn.schema_names = frozenset(
        str(row[0]) for row in conn.query("SELECT name FROM sqlite_master")
    )


def vec_table_sql(conn: Connection) -> str | None:
    value = conn.scalar(_TABLE_SQL, ("vectors_vec",))
    return None if value is None else str(value)


def vec_table_dimensions(conn: Connection) -> int | None:
    sql = vec_table_sql(conn)
    if sql is None:
        return None
    match = re.search(r"float\[(\d+)\]", sql)
    return int(match.group(1)) if match else None


def ensure_vec_table(conn: Connection, dimensions: int) -> None:
    """Create `vectors_vec` for `dimensions`; refuse a different existing dimension."""
    if not conn.vec_available:
        raise QmdError(
            UNAVAILABLE,
            "sqlite-vec extension is unavailable. "
            f"{conn.vec_error or 'vector operations require extension loading support'}.",
        )
    sql = vec_table_sql(conn)
    if sql is not None:
        existing = vec_table_dimensions(conn)
        if existing == dimensions and "hash_seq" in sql and "distance_metric=cosine" in sql:
            return
        if existing is not None and existing != dimensions:
            raise mismatch(existing, dimensions)
        conn.execute("DROP TABLE IF EXISTS vectors_vec")
    conn.execute(VECTORS_VEC_DDL.format(dims=int(dimensions)))
