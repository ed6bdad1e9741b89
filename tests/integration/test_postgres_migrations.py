"""An index made before the later tables (schema version 1: QMD 2.8.3's tables only) is brought
up to date when it is opened: its documents stay, and metadata, the extraction ledger, the
memory rows and the chunk rows work on it (adapters/postgres/schema.py). BM25's corpus figures
(`fts_stats`, migration 6) start from the rows an older index has and follow every write."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from adapters.postgres.schema import MIGRATIONS, SCHEMA_VERSION, current_version, migrate
from adapters.postgres.store import PostgresIndex
from adapters.postgres.url import split_schema
from domain.extraction import ExtractionState
from domain.indexing import FileStamp
from domain.lexquery import parse_lex_query
from domain.ports import DocumentCut
from domain.sections import split_sections
from domain.stamps import RecordedStamp
from tests.postgres_server import drop_schema, fresh_schema_url, older_index, write_old_document

pytestmark = pytest.mark.postgres
T0 = "2025-01-01T00:00:00.000Z"


def test_a_version_1_index_is_migrated_on_open() -> None:
    url, schema = fresh_schema_url()
    conninfo, _ = split_schema(url)
    try:
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        with psycopg.connect(conninfo, options=f"-c search_path={schema},public") as conn:
            conn.autocommit = True
            assert current_version(conn) == 0
            assert migrate(conn, MIGRATIONS[:1]) == 1
            conn.execute(
                "INSERT INTO content (hash, doc, created_at) VALUES ('h', '# A\nalpha', %s)", (T0,)
            )
            conn.execute(
                "INSERT INTO documents (collection, path, title, hash, created_at, modified_at) "
                "VALUES ('c', 'a.md', 'A', 'h', %s, %s)",
                (T0, T0),
            )
        index = PostgresIndex.open(url)
        try:
            with index.connection() as conn:
                assert current_version(conn) == SCHEMA_VERSION == 15
            (doc,) = index.documents()
            index.put_metadata("c", "a.md", {"author": "Ana"})
            assert index.metadata_by_id([doc.id]) == {doc.id: {"author": "Ana"}}
            index.record_states("c", [ExtractionState("c", "a.pdf", "ok")])
            assert index.extraction_state("c", "a.pdf") is not None
            index.put_memory_topic("t", b"\x00" * 8)
            assert index.memory_topics() == [("t", b"\x00" * 8)]
            index.replace_chunks([DocumentCut(doc.id, "h", split_sections("# A\nalpha"))])
            assert [r.heading_path for r in index.document_chunks("c", "a.md")] == ["A"]
        finally:
            index.close()
    finally:
        drop_schema(schema)


def _figures(index: PostgresIndex) -> tuple[tuple[int, int], tuple[int, int]]:
    """(what fts_stats holds, what a scan of documents_fts counts)."""
    with index.connection() as conn:
        kept = conn.execute("SELECT documents, total_len FROM fts_stats").fetchone()
        counted = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(len), 0) FROM documents_fts"
        ).fetchone()
    assert kept is not None and counted is not None
    return (int(kept[0]), int(kept[1])), (int(counted[0]), int(counted[1]))


def test_bm25_corpus_figures_follow_every_write() -> None:
    # an index written before the figures were kept (version 5), with four documents
    with older_index(5) as (url, schema, conn):
        for n in range(4):
            write_old_document(conn, n, f"# Note {n}\n\n" + "word " * (10 * (n + 1)))
    try:
        index = PostgresIndex.open(url, env={})  # migrated to the current version on open
        try:
            kept, counted = _figures(index)
            assert kept == counted and counted[0] == 4
            with index.transaction():  # a changed body (UPDATE) and a new document (INSERT)
                index.upsert_document("c", "n0.md", "Note 0", "h9", "# Note 0\n\nshort", T0, T0)
                index.upsert_document("d", "x.md", "X", "hx", "# X\n\n" + "y " * 50, T0, T0)
            kept, counted = _figures(index)
            assert kept == counted and counted[0] == 5
            index.deactivate_documents("c", ["n1.md"])  # DELETE
            kept, counted = _figures(index)
            assert kept == counted and counted[0] == 4
            index.delete_collection("d")  # the foreign key's cascade
            kept, counted = _figures(index)
            assert kept == counted and counted[0] == 3
            hits = index.search_lex(parse_lex_query("word"), 10, None)
            assert {h.document.meta.path for h in hits} == {"n2.md", "n3.md"}
        finally:
            index.close()
    finally:
        drop_schema(schema)


def _toasted_rows(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """Rows of documents_fts' TOAST table: a tsvector stored out of its row."""
    row = conn.execute(
        "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'documents_fts'::regclass"
    ).fetchone()
    assert row is not None
    counted = conn.execute(sql.SQL("SELECT COUNT(*) FROM {}").format(sql.SQL(str(row[0]))))
    return int(counted.fetchone()[0])  # type: ignore[index]


def test_migration_10_keeps_every_tsvector_in_its_row_and_changes_no_figure() -> None:
    """Version 9 stored a long document's tsvector out of its row (TOAST), which ranking read
    again for every clause; version 10 keeps it in the row and rewrites the rows already
    there, leaving BM25's kept figures and every answer as they were."""
    with older_index(9) as (url, schema, conn):
        for n in range(12):
            # 300 distinct words: a tsvector of about 4 kB, stored apart in v9
            write_old_document(conn, n, " ".join(f"w{n}x{k}" for k in range(300)) + " common")
        assert _toasted_rows(conn) > 0
        before = conn.execute(FIGURES).fetchone()
        # version 10 alone: later migrations rewrite the rows on purpose (12, 13)
        assert migrate(conn, MIGRATIONS[:10]) == 10
        assert _toasted_rows(conn) == 0
        assert conn.execute(FIGURES).fetchone() == before
    try:
        index = PostgresIndex.open(url, env={})
        try:
            with index.connection() as conn:
                assert current_version(conn) == SCHEMA_VERSION == 15
                assert _toasted_rows(conn) == 0
            hits = index.search_lex(parse_lex_query("common w3x7"), 10, None)
            assert [h.document.meta.path for h in hits] == ["n3.md"]
            # a document written now is kept in its row as well
            index.upsert_document(
                "c", "new.md", "New", "hn", " ".join(f"new{k}" for k in range(300)), T0, T0
            )
            with index.connection() as conn:
                assert _toasted_rows(conn) == 0
        finally:
            index.close()
    finally:
        drop_schema(schema)


# every tsvector, every kept lexeme frequency and the corpus figures
FIGURES = (
    "SELECT (SELECT array_agg(tsv::text ORDER BY id) FROM documents_fts),"
    " (SELECT array_agg(lexeme || documents ORDER BY lexeme) FROM fts_lexemes),"
    " (SELECT documents || ' ' || total_len FROM fts_stats)"
)


def test_migration_11_gives_an_older_index_empty_file_stamps() -> None:
    """A version 10 index (no stamps: every update read every file) gains the stamps table,
    empty, keeps its documents, and records stamps from then on (REQ-INDEX-NOOP-001)."""
    with older_index(10) as (url, schema, conn):
        write_old_document(conn, 1, "alpha")
        assert conn.execute("SELECT to_regclass('py_file_stamps')").fetchone() == (None,)
    try:
        index = PostgresIndex.open(url, env={})
        try:
            with index.connection() as conn:
                assert current_version(conn) == SCHEMA_VERSION == 15
            assert [d.path for d in index.documents()] == ["n1.md"]
            assert index.file_stamps("c") == {}
            stamp = RecordedStamp(FileStamp(5, 10, 11, 12), 9, "h1", "Note 1")
            index.record_file_stamps("c", {"n1.md": stamp})
            assert index.file_stamps("c") == {"n1.md": stamp}
        finally:
            index.close()
    finally:
        drop_schema(schema)


def test_migration_12_counts_tokens_and_drops_the_column_separator() -> None:
    """Version 11 kept the stemmed column separator in every row and each row's distinct
    lexemes as its length; version 12 drops the separator (row and df) and stores the token
    count that FTS5's bm25 uses, with the kept total to match (issue 36)."""
    separator = "setweight(to_tsvector('qmd_text', 'qmdcolumnseparator'), 'C')"
    with older_index(11) as (_, schema, conn):
        for n in range(3):
            write_old_document(conn, n, f"alpha beta alpha gamma{n} alpha")
        # the row as version 11 wrote it: the separator kept, distinct lexemes as the length
        conn.execute(f"UPDATE documents_fts SET tsv = {separator} || tsv")
        conn.execute("UPDATE documents_fts SET len = length(tsv)")
        conn.execute("UPDATE fts_stats SET total_len = (SELECT SUM(len) FROM documents_fts)")
        assert conn.execute("SELECT SUM(len) FROM documents_fts").fetchone() == (3 * 7,)
        separators = "SELECT documents FROM fts_lexemes WHERE lexeme = 'qmdcolumnsepar'"
        assert conn.execute(separators).fetchone() == (3,)
        assert migrate(conn, MIGRATIONS[:12]) == 12
        # c n0 md (path) + 5 body words, per row
        assert conn.execute("SELECT array_agg(len) FROM documents_fts").fetchone() == ([8, 8, 8],)
        stats = "SELECT documents, total_len FROM fts_stats"
        assert conn.execute(stats).fetchone() == (3, 24)
        assert conn.execute(
            "SELECT COUNT(*) FROM documents_fts WHERE tsv @@ 'qmdcolumnsepar'::tsquery"
        ).fetchone() == (0,)
        assert conn.execute(separators).fetchone() is None
    drop_schema(schema)


def test_migration_13_stems_every_row_again_with_porters_algorithm() -> None:
    """Version 12 stemmed with English Snowball (Porter 2): "generalization" was `general`,
    where FTS5's Porter makes it `gener`. Version 13 stems with Porter and writes every row
    again from its document; the kept frequencies follow (issue 36)."""
    with older_index(12) as (url, schema, conn):
        write_old_document(conn, 1, "generalization of skies")
        write_old_document(conn, 2, "general skies")
        assert conn.execute(
            "SELECT documents FROM fts_lexemes WHERE lexeme = 'general'"
        ).fetchone() == (2,)
    try:
        index = PostgresIndex.open(url, env={})
        try:
            with index.connection() as conn:
                assert current_version(conn) == SCHEMA_VERSION == 15
                kept = dict(
                    conn.execute(
                        "SELECT lexeme, documents FROM fts_lexemes WHERE documents > 0"
                        " AND lexeme IN ('general', 'gener', 'sky', 'ski')"
                    ).fetchall()
                )
                assert kept == {"gener": 2, "ski": 2}
                assert conn.execute(
                    "SELECT COUNT(*) FROM documents_fts WHERE tsv @@ 'gener'::tsquery"
                ).fetchone() == (2,)
            hits = index.search_lex(parse_lex_query("generalization"), 10, None)
            assert sorted(h.document.meta.path for h in hits) == ["n1.md", "n2.md"]
        finally:
            index.close()
    finally:
        drop_schema(schema)


def test_migration_14_keeps_two_letter_words_as_fts5_does() -> None:
    """Version 13 stemmed `ls` to `l` (Snowball's porter; FTS5 stems no word under three
    letters), so `ls` matched every page with a `-l` flag, and `technology` to `technologi`
    (FTS5: `technolog`). Version 14 writes every row again, folded so that the stems are
    FTS5's, and `ls` finds the page that names it (issue 36)."""
    with older_index(13) as (url, schema, conn):
        write_old_document(conn, 1, "ls lists files")
        write_old_document(conn, 2, "ps -l shows processes")
        write_old_document(conn, 3, "technology notes")
        # the rows as version 13 wrote them: the words folded without marks
        conn.execute(
            "UPDATE documents_fts f SET tsv = to_tsvector('qmd_text', c.doc) FROM documents d"
            " JOIN content c ON c.hash = d.hash WHERE d.id = f.id"
        )
        assert conn.execute(
            "SELECT COUNT(*) FROM documents_fts WHERE tsv @@ 'l'::tsquery"
        ).fetchone() == (2,)
    try:
        index = PostgresIndex.open(url, env={})
        try:
            with index.connection() as conn:
                assert current_version(conn) == SCHEMA_VERSION == 15
                assert conn.execute(
                    "SELECT COUNT(*) FROM documents_fts WHERE tsv @@ 'l'::tsquery"
                ).fetchone() == (1,)
                # FTS5's (Porter's later) stem, not Snowball's `technologi`
                assert conn.execute(
                    "SELECT COUNT(*) FROM documents_fts WHERE tsv @@ 'technolog'::tsquery"
                ).fetchone() == (1,)
            hits = index.search_lex(parse_lex_query("ls"), 10, None)
            assert [h.document.meta.path for h in hits] == ["n1.md"]
        finally:
            index.close()
    finally:
        drop_schema(schema)
