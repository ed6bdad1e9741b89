"""The PostgreSQL index schema as an ordered list of versioned migrations.

Each migration is a tuple of statements applied in one transaction, under an advisory lock
(so two processes opening a new index do not both create it), and recorded in
`qmd_schema_version`. A new table (a later feature's) is one more entry at the end of
`MIGRATIONS`; an applied migration is never edited.

Tables mirror the SQLite index (docs/decisions/0042): the same names and columns, so that
`qmd index copy` moves rows across unchanged, plus two PostgreSQL-only pieces:

* `documents_fts` holds one `tsvector` per active document (title, file path and body with
  their own weights) behind a GIN index; the adapter rewrites it with each document, as the
  SQLite adapter rewrites its FTS5 row.
* `vectors_vec` is created on the first stored embedding, with the model's dimension, and
  carries an HNSW index on cosine distance.
* `fts_stats` keeps BM25's corpus figures (documents and their total length), which triggers
  on `documents_fts` update with every write, so a search does not scan the table for them.
* `fts_lexemes` keeps each lexeme's document frequency (BM25's idf), folded in once per
  writing transaction (migration 9).
* `py_file_stamps` (migration 11) is made with the schema, where SQLite makes it on the first
  stamp (only the original QMD, which never opens PostgreSQL, minds a table it does not know).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from psycopg import Connection

from adapters.postgres.tsquery import TS_CONFIG

# adapters/postgres/fts.py's column separator, unstemmed and as English Snowball stems it (an
# applied migration never changes, so it is spelled out here, not imported)
_SEPARATORS = "ARRAY['qmdcolumnseparator', 'qmdcolumnsepar']"

# ---- issue 26 (pglex): document frequencies folded once per transaction (migration 9) ----

LEXEME_FOLD_MIGRATION: tuple[str, ...] = (
    "DROP TRIGGER fts_lexemes_on_insert ON documents_fts",
    "DROP TRIGGER fts_lexemes_on_delete ON documents_fts",
    "DROP TRIGGER fts_lexemes_on_update ON documents_fts",
    "DROP FUNCTION fts_lexemes_added()",
    "DROP FUNCTION fts_lexemes_removed()",
    "DROP FUNCTION fts_lexemes_changed()",
    """CREATE UNLOGGED TABLE fts_lexeme_changes (
         lexemes TEXT[] NOT NULL,
         delta INTEGER NOT NULL)""",
    # one row per writing transaction: its deferred trigger folds the queue once
    """CREATE UNLOGGED TABLE fts_lexeme_pending (
         xact BIGINT PRIMARY KEY)""",
    """CREATE FUNCTION fts_lexemes_queue() RETURNS trigger LANGUAGE plpgsql
         SET search_path FROM CURRENT AS $$
       BEGIN
         IF TG_OP IN ('INSERT', 'UPDATE') THEN
           INSERT INTO fts_lexeme_changes (lexemes, delta)
             SELECT tsvector_to_array(tsv), 1 FROM added;
         END IF;
         IF TG_OP IN ('DELETE', 'UPDATE') THEN
           INSERT INTO fts_lexeme_changes (lexemes, delta)
             SELECT tsvector_to_array(tsv), -1 FROM removed;
         END IF;
         INSERT INTO fts_lexeme_pending (xact) VALUES (txid_current()) ON CONFLICT DO NOTHING;
         RETURN NULL;
       END $$""",
    # one delta per lexeme, applied in lexeme order (concurrent writers lock rows in the same
    # order); the queue rows it deletes are this transaction's own (others' are invisible)
    """CREATE FUNCTION fts_lexemes_fold() RETURNS trigger LANGUAGE plpgsql
         SET search_path FROM CURRENT AS $$
       BEGIN
         DELETE FROM fts_lexeme_pending WHERE xact = NEW.xact;
         WITH gone AS (DELETE FROM fts_lexeme_changes RETURNING lexemes, delta)
         INSERT INTO fts_lexemes (lexeme, documents)
           SELECT lexeme, SUM(delta) FROM gone, unnest(lexemes) AS lexeme
           GROUP BY lexeme HAVING SUM(delta) <> 0 ORDER BY lexeme
         ON CONFLICT (lexeme) DO UPDATE
           SET documents = fts_lexemes.documents + excluded.documents;
         RETURN NULL;
       END $$""",
    "CREATE TRIGGER fts_lexemes_on_insert AFTER INSERT ON documents_fts"
    " REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION fts_lexemes_queue()",
    "CREATE TRIGGER fts_lexemes_on_delete AFTER DELETE ON documents_fts"
    " REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION fts_lexemes_queue()",
    "CREATE TRIGGER fts_lexemes_on_update AFTER UPDATE ON documents_fts"
    " REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT"
    " EXECUTE FUNCTION fts_lexemes_queue()",
    "CREATE CONSTRAINT TRIGGER fts_lexemes_at_commit AFTER INSERT ON fts_lexeme_pending"
    " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fts_lexemes_fold()",
)


MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the index of QMD 2.8.3, on PostgreSQL
    (
        """CREATE TABLE content (
             hash TEXT PRIMARY KEY,
             doc TEXT NOT NULL,
             created_at TEXT NOT NULL)""",
        """CREATE TABLE documents (
             id BIGSERIAL PRIMARY KEY,
             collection TEXT NOT NULL,
             path TEXT NOT NULL,
             title TEXT NOT NULL,
             hash TEXT NOT NULL REFERENCES content(hash) ON DELETE CASCADE,
             created_at TEXT NOT NULL,
             modified_at TEXT NOT NULL,
             active INTEGER NOT NULL DEFAULT 1,
             UNIQUE (collection, path))""",
        "CREATE INDEX idx_documents_collection ON documents(collection, active)",
        "CREATE INDEX idx_documents_hash ON documents(hash)",
        "CREATE INDEX idx_documents_path ON documents(path, active)",
        """CREATE TABLE llm_cache (
             hash TEXT PRIMARY KEY,
             result TEXT NOT NULL,
             created_at TEXT NOT NULL)""",
        """CREATE TABLE content_vectors (
             hash TEXT NOT NULL,
             seq INTEGER NOT NULL DEFAULT 0,
             pos INTEGER NOT NULL DEFAULT 0,
             model TEXT NOT NULL,
             embed_fingerprint TEXT NOT NULL DEFAULT '',
             total_chunks INTEGER NOT NULL DEFAULT 1,
             embedded_at TEXT NOT NULL,
             PRIMARY KEY (hash, seq))""",
        """CREATE INDEX idx_content_vectors_model_fingerprint
             ON content_vectors(model, embed_fingerprint, hash, total_chunks)""",
        """CREATE TABLE store_collections (
             ord BIGSERIAL,
             name TEXT PRIMARY KEY,
             path TEXT NOT NULL,
             pattern TEXT NOT NULL DEFAULT '**/*.md',
             ignore_patterns TEXT,
             include_by_default INTEGER DEFAULT 1,
             update_command TEXT,
             context TEXT)""",
        """CREATE TABLE store_config (
             key TEXT PRIMARY KEY,
             value TEXT)""",
        f"CREATE TEXT SEARCH DICTIONARY {TS_CONFIG}_stem (TEMPLATE = snowball, Language = english)",
        f"CREATE TEXT SEARCH CONFIGURATION {TS_CONFIG} (COPY = pg_catalog.english)",
        f"""ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG} ALTER MAPPING FOR
             asciiword, asciihword, hword_asciipart, word, hword, hword_part,
             numword, numhword, hword_numpart WITH {TS_CONFIG}_stem""",
        """CREATE TABLE documents_fts (
             id BIGINT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
             tsv TSVECTOR NOT NULL,
             len INTEGER NOT NULL DEFAULT 0)""",
        "CREATE INDEX idx_documents_fts ON documents_fts USING GIN (tsv)",
    ),
    # 2: document metadata (REQ-META-004), keyed by documents.id as on SQLite; the foreign key
    # removes a document's row with the document (cleanup, collection removal)
    (
        """CREATE TABLE py_document_metadata (
             doc_id BIGINT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
             metadata TEXT NOT NULL)""",
    ),
    # 3: the extraction ledger (REQ-EXTRACT-*): outcomes cached by source content hash, and
    # the state of every extracted document; the same columns as on SQLite
    (
        """CREATE TABLE extraction_cache (
             source_hash TEXT PRIMARY KEY,
             status TEXT NOT NULL,
             text_hash TEXT NOT NULL DEFAULT '',
             title TEXT NOT NULL DEFAULT '',
             metadata TEXT NOT NULL DEFAULT '{}',
             pages INTEGER NOT NULL DEFAULT 0,
             empty_pages TEXT NOT NULL DEFAULT '[]',
             reason TEXT NOT NULL DEFAULT '',
             detail TEXT NOT NULL DEFAULT '')""",
        """CREATE TABLE extraction_state (
             collection TEXT NOT NULL,
             path TEXT NOT NULL,
             status TEXT NOT NULL,
             reason TEXT NOT NULL DEFAULT '',
             detail TEXT NOT NULL DEFAULT '',
             source_hash TEXT NOT NULL DEFAULT '',
             pages INTEGER NOT NULL DEFAULT 0,
             empty_pages TEXT NOT NULL DEFAULT '[]',
             extracted_at TEXT NOT NULL DEFAULT '',
             PRIMARY KEY (collection, path))""",
    ),
    # 4: seed 004's memory (REQ-MEM-STORE-*): topic and record vectors as little-endian
    # float32 bytes, the SQLite index's blobs unchanged
    (
        """CREATE TABLE memory_topics (
             name TEXT PRIMARY KEY,
             vector BYTEA NOT NULL,
             created_at TEXT NOT NULL)""",
        """CREATE TABLE memory_records (
             id TEXT PRIMARY KEY,
             kind TEXT NOT NULL,
             topic TEXT NOT NULL,
             path TEXT NOT NULL,
             file_hash TEXT NOT NULL,
             record TEXT NOT NULL,
             vector BYTEA NOT NULL)""",
        "CREATE INDEX idx_memory_records_topic ON memory_records(topic, kind)",
    ),
    # 5: seed 002's chunk rows, namespace ids and session summaries (REQ-PROJMEM-*); chunk
    # ids come from a sequence and are never reused, rows go with their document
    (
        """CREATE TABLE pyqmd_chunks (
             id BIGSERIAL PRIMARY KEY,
             doc_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
             hash TEXT NOT NULL,
             seq INTEGER NOT NULL,
             heading_path TEXT NOT NULL,
             start_line INTEGER NOT NULL,
             end_line INTEGER NOT NULL,
             text TEXT NOT NULL,
             UNIQUE (doc_id, seq))""",
        """CREATE TABLE pyqmd_namespaces (
             id BIGSERIAL PRIMARY KEY,
             name TEXT NOT NULL UNIQUE)""",
        """CREATE TABLE pyqmd_session_summaries (
             session_id TEXT PRIMARY KEY,
             summary_json TEXT NOT NULL,
             updated_at TEXT NOT NULL)""",
    ),
    # 6: BM25's corpus figures kept current by statement-level triggers on documents_fts
    # (every writer, a cascade and COPY included); before this, each search counted the
    # documents and averaged their lengths over the whole table (44 ms at 100,000)
    (
        """CREATE TABLE fts_stats (
             singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
             documents BIGINT NOT NULL,
             total_len BIGINT NOT NULL)""",
        "INSERT INTO fts_stats (documents, total_len)"
        " SELECT COUNT(*), COALESCE(SUM(len), 0) FROM documents_fts",
        # SET search_path FROM CURRENT: the functions find this schema's table whoever writes
        """CREATE FUNCTION fts_stats_added() RETURNS trigger LANGUAGE plpgsql
             SET search_path FROM CURRENT AS $$
           BEGIN
             UPDATE fts_stats SET documents = documents + d.n, total_len = total_len + d.l
               FROM (SELECT COUNT(*) AS n, COALESCE(SUM(len), 0) AS l FROM added) d;
             RETURN NULL;
           END $$""",
        """CREATE FUNCTION fts_stats_removed() RETURNS trigger LANGUAGE plpgsql
             SET search_path FROM CURRENT AS $$
           BEGIN
             UPDATE fts_stats SET documents = documents - d.n, total_len = total_len - d.l
               FROM (SELECT COUNT(*) AS n, COALESCE(SUM(len), 0) AS l FROM removed) d;
             RETURN NULL;
           END $$""",
        """CREATE FUNCTION fts_stats_changed() RETURNS trigger LANGUAGE plpgsql
             SET search_path FROM CURRENT AS $$
           BEGIN
             UPDATE fts_stats SET total_len = total_len
               + (SELECT COALESCE(SUM(len), 0) FROM added)
               - (SELECT COALESCE(SUM(len), 0) FROM removed);
             RETURN NULL;
           END $$""",
        "CREATE TRIGGER fts_stats_on_insert AFTER INSERT ON documents_fts"
        " REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION fts_stats_added()",
        "CREATE TRIGGER fts_stats_on_delete AFTER DELETE ON documents_fts"
        " REFERENCING OLD TABLE AS removed FOR EACH STATEMENT"
        " EXECUTE FUNCTION fts_stats_removed()",
        "CREATE TRIGGER fts_stats_on_update AFTER UPDATE ON documents_fts"
        " REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT"
        " EXECUTE FUNCTION fts_stats_changed()",
    ),
    # 7: each lexeme's document frequency (BM25's idf of a one-word clause, and of a prefix
    # that one lexeme of the index completes), kept by
    # statement-level triggers like fts_stats; before this, each search counted every row
    # matching any of its words (the bulk of a ten-word query's time at 100,000 documents).
    # A count that falls to 0 keeps its row: a df of 0 is still right.
    (
        # byte order (COLLATE "C"): a prefix query reads its lexemes as one range of the key
        """CREATE TABLE fts_lexemes (
             lexeme TEXT COLLATE "C" PRIMARY KEY,
             documents BIGINT NOT NULL)""",
        "INSERT INTO fts_lexemes (lexeme, documents) SELECT lexeme, COUNT(*)"
        " FROM documents_fts, unnest(tsvector_to_array(tsv)) AS lexeme GROUP BY lexeme",
        # one delta per lexeme, applied in lexeme order (concurrent writers lock rows in the
        # same order); a tsvector lists each lexeme once, so a row counts one document
        """CREATE FUNCTION fts_lexemes_added() RETURNS trigger LANGUAGE plpgsql
             SET search_path FROM CURRENT AS $$
           BEGIN
             INSERT INTO fts_lexemes (lexeme, documents)
               SELECT lexeme, COUNT(*) FROM added, unnest(tsvector_to_array(tsv)) AS lexeme
               GROUP BY lexeme ORDER BY lexeme
             ON CONFLICT (lexeme) DO UPDATE
               SET documents = fts_lexemes.documents + excluded.documents;
             RETURN NULL;
           END $$""",
        """CREATE FUNCTION fts_lexemes_removed() RETURNS trigger LANGUAGE plpgsql
             SET search_path FROM CURRENT AS $$
           BEGIN
             UPDATE fts_lexemes l SET documents = l.documents - r.n
               FROM (SELECT lexeme, COUNT(*) AS n
                       FROM removed, unnest(tsvector_to_array(tsv)) AS lexeme
                      GROUP BY lexeme ORDER BY lexeme) r
              WHERE l.lexeme = r.lexeme;
             RETURN NULL;
           END $$""",
        """CREATE FUNCTION fts_lexemes_changed() RETURNS trigger LANGUAGE plpgsql
             SET search_path FROM CURRENT AS $$
           BEGIN
             INSERT INTO fts_lexemes (lexeme, documents)
               SELECT lexeme, SUM(n) FROM (
                   SELECT lexeme, 1 AS n FROM added, unnest(tsvector_to_array(tsv)) AS lexeme
                   UNION ALL
                   SELECT lexeme, -1 FROM removed, unnest(tsvector_to_array(tsv)) AS lexeme
                 ) c
               GROUP BY lexeme HAVING SUM(n) <> 0 ORDER BY lexeme
             ON CONFLICT (lexeme) DO UPDATE
               SET documents = fts_lexemes.documents + excluded.documents;
             RETURN NULL;
           END $$""",
        "CREATE TRIGGER fts_lexemes_on_insert AFTER INSERT ON documents_fts"
        " REFERENCING NEW TABLE AS added FOR EACH STATEMENT"
        " EXECUTE FUNCTION fts_lexemes_added()",
        "CREATE TRIGGER fts_lexemes_on_delete AFTER DELETE ON documents_fts"
        " REFERENCING OLD TABLE AS removed FOR EACH STATEMENT"
        " EXECUTE FUNCTION fts_lexemes_removed()",
        "CREATE TRIGGER fts_lexemes_on_update AFTER UPDATE ON documents_fts"
        " REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT"
        " EXECUTE FUNCTION fts_lexemes_changed()",
    ),
    # 8: a filter's candidates through an index of the metadata (REQ-FILTER-009): GIN over
    # the stored JSON; a row that is not valid JSON (nothing qmd writes) maps to NULL rather
    # than failing the write or the migration
    (
        """CREATE FUNCTION qmd_metadata_jsonb(text) RETURNS jsonb LANGUAGE plpgsql
             IMMUTABLE STRICT AS $$
           BEGIN
             RETURN $1::jsonb;
           EXCEPTION WHEN others THEN
             RETURN NULL;
           END $$""",
        "CREATE INDEX idx_py_document_metadata_values ON py_document_metadata"
        " USING GIN (qmd_metadata_jsonb(metadata))",
    ),
    # 9: each lexeme's document frequency folded into fts_lexemes once per transaction, not
    # once per written document (issue 26: migration 7's per-statement upserts doubled the
    # time to index, the adapter writing documents_fts one document per statement). The
    # triggers queue each written row's lexemes (one insert) and mark the transaction; a
    # deferred constraint trigger on the mark folds the queue at commit: one grouped upsert.
    # Both tables are empty outside a writing transaction, so a crash (UNLOGGED: truncated)
    # loses nothing; another session never sees an unfolded queue (READ COMMITTED).
    LEXEME_FOLD_MIGRATION,
    # 10: each tsvector kept in its row (STORAGE MAIN: moved out of the row only when the row
    # cannot fit a page). Stored apart (TOAST) from about 2 kB, each ts_rank of a ranked row
    # fetched it through the TOAST index again: two clauses over 245 rows took 1.43 ms, in
    # the row 0.41 ms (issue 26, the any-term fill). The rows are rewritten so that every one
    # is kept alike; the rewrite changes no value, so the triggers that keep BM25's figures
    # (which would queue and fold every row's lexemes for nothing) are held off while it runs.
    (
        "ALTER TABLE documents_fts ALTER COLUMN tsv SET STORAGE MAIN",
        "ALTER TABLE documents_fts DISABLE TRIGGER USER",
        # a new value (the tsvector with nothing appended) is stored by the new rule; the
        # same value would keep its old out-of-row copy
        "UPDATE documents_fts SET tsv = tsv || ''::tsvector",
        "ALTER TABLE documents_fts ENABLE TRIGGER USER",
    ),
    # 11: each indexed file's stamp as the update that last read it saw it (REQ-INDEX-NOOP-001),
    # the columns of SQLite's py_file_stamps; before this every update on PostgreSQL read every
    # file (issue 36: 3.0-3.7 s for a no-op update of 8,791 files, SQLite 0.4-0.5 s). An index
    # that gains the table starts with no stamps: its next update reads every file once.
    (
        """CREATE TABLE py_file_stamps (
             collection TEXT NOT NULL,
             path TEXT NOT NULL,
             size BIGINT NOT NULL,
             mtime_ns BIGINT NOT NULL,
             ctime_ns BIGINT NOT NULL,
             inode NUMERIC(20) NOT NULL,
             scan_started_ns BIGINT NOT NULL,
             hash TEXT NOT NULL,
             title TEXT NOT NULL,
             reader TEXT NOT NULL DEFAULT '',
             PRIMARY KEY (collection, path))""",
    ),
    # 12: each row's length is its token count, as FTS5's bm25 counts a row's length (issue 36:
    # the count of distinct lexemes made a long page look short, and PostgreSQL ranked apart
    # from SQLite), and the column separator, which the stemmer had turned into a lexeme that
    # ts_delete did not find, leaves every row. The triggers are held off while the rows are
    # rewritten, then the separator's df and the total length are set once.
    (
        "ALTER TABLE documents_fts DISABLE TRIGGER USER",
        f"UPDATE documents_fts SET tsv = ts_delete(tsv, {_SEPARATORS}), len ="
        " (SELECT COALESCE(SUM(cardinality(positions)), 0)"
        f" FROM unnest(ts_delete(tsv, {_SEPARATORS})))",
        "ALTER TABLE documents_fts ENABLE TRIGGER USER",
        f"DELETE FROM fts_lexemes WHERE lexeme = ANY({_SEPARATORS})",
        "UPDATE fts_stats SET total_len = (SELECT COALESCE(SUM(len), 0) FROM documents_fts)",
    ),
    # 13: words stemmed by Porter's original algorithm, as FTS5's `porter` tokenizer stems them
    # (Snowball's `porter`, not its `english`, Porter 2): "generalization" is `gener` on both
    # backends (issue 36). The lexemes already indexed were stemmed the other way and their
    # words are gone from the tsvector, so every row is written again from its document
    # (REBUILDS, below, at 14): the triggers keep the frequencies and lengths as it goes.
    (
        f"CREATE TEXT SEARCH DICTIONARY {TS_CONFIG}_porter"
        " (TEMPLATE = snowball, Language = porter)",
        f"""ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG} ALTER MAPPING FOR
             asciiword, asciihword, hword_asciipart, word, hword, hword_part,
             numword, numhword, hword_numpart WITH {TS_CONFIG}_porter""",
    ),
    # 14: words folded so that Snowball's porter gives FTS5's stems (adapters/postgres/tsquery.py,
    # issue 36): a two-character word kept as FTS5 keeps it (`ls` was `l`), and Porter's later
    # `logi` -> `log`, `bli` -> `ble` (`technology` was `technologi`). The rows are written
    # again from their documents (REBUILDS).
    (),
    # 15: room in each page of fts_lexemes for a new version of its rows, so that folding a
    # batch's lexemes (every lexeme of 1,000 documents, about 14,000 rows) updates them in
    # place of the page (HOT) instead of adding an entry to the key's index per lexeme: the
    # fold of a batch took 40 % less (issue 36, REQ-INDEX-BATCH-001). Pages written before
    # keep their packing until rewritten (`qmd cleanup`'s VACUUM does not; a new index has
    # none).
    ("ALTER TABLE fts_lexemes SET (fillfactor = 50)",),
)

REBUILD_BATCH = 500


def rebuild_fts_rows(conn: Connection[tuple[object, ...]]) -> None:
    """Write every active document's full-text row again, as the adapter writes one, a batch
    of documents at a time (their bodies are not all held at once)."""
    from adapters.postgres.fts import fts_params, fts_row_sql  # fts imports this module

    ids = [int(str(row[0])) for row in conn.execute("SELECT id FROM documents WHERE active = 1")]
    for start in range(0, len(ids), REBUILD_BATCH):
        rows = conn.execute(
            "SELECT d.id, d.collection, d.path, d.title, c.doc FROM documents d"
            " JOIN content c ON c.hash = d.hash WHERE d.id = ANY(%s) ORDER BY d.id",
            (ids[start : start + REBUILD_BATCH],),
        ).fetchall()
        with conn.cursor() as cur:
            cur.executemany(
                fts_row_sql(),
                [fts_params(int(str(r[0])), *(str(v) for v in r[1:])) for r in rows],
            )


# Work a migration needs done in Python after its statements, in its transaction: the number
# of the migration -> the function (it takes the migrating connection).
# 13's rewrite moved to 14, which writes the same rows with the folding 14 needs: an index older
# than 13 is rewritten once, not twice (both run in one transaction).
REBUILDS: dict[int, Callable[[Connection[tuple[object, ...]]], None]] = {14: rebuild_fts_rows}

SCHEMA_VERSION = len(MIGRATIONS)

# HNSW build parameters (docs/decisions/0042): pgvector's defaults are m=16,
# ef_construction=64): measured at 1M vectors in benchmarks/bench_scale.py.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64


def vectors_ddl(dimensions: int) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE vectors_vec (
             hash TEXT NOT NULL,
             seq INTEGER NOT NULL,
             embedding vector({int(dimensions)}) NOT NULL,
             PRIMARY KEY (hash, seq))""",
        VECTORS_HNSW_DDL,
    )


VECTORS_HNSW_DDL = (
    "CREATE INDEX IF NOT EXISTS idx_vectors_vec_hnsw ON vectors_vec "
    f"USING hnsw (embedding vector_cosine_ops) WITH (m = {HNSW_M}, "
    f"ef_construction = {HNSW_EF_CONSTRUCTION})"
)

_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('qmd-schema:' || current_schema()))"


def current_version(conn: Connection[tuple[object, ...]]) -> int:
    exists = conn.execute(
        "SELECT to_regclass(quote_ident(current_schema()) || '.qmd_schema_version')"
    ).fetchone()
    if exists is None or exists[0] is None:
        return 0
    row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM qmd_schema_version").fetchone()
    return int(row[0]) if row else 0  # type: ignore[call-overload]


def migrate(
    conn: Connection[tuple[object, ...]], migrations: Sequence[tuple[str, ...]] = MIGRATIONS
) -> int:
    """Apply every migration newer than the index; returns the resulting version."""
    with conn.transaction():
        conn.execute(_LOCK_SQL)
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS qmd_schema_version ("
            " version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        version = current_version(conn)
        for number, statements in enumerate(migrations, start=1):
            if number <= version:
                continue
            for statement in statements:
                conn.execute(statement)
            if number in REBUILDS:
                REBUILDS[number](conn)
            conn.execute("INSERT INTO qmd_schema_version (version) VALUES (%s)", (number,))
            version = number
    return version
