"""The full-text rows of the PostgreSQL index: one tsvector per document over its path, title
and body (written on every document change, rebuilt by `qmd index copy`)."""

from __future__ import annotations

from typing import Any

from adapters.postgres.tsquery import MAX_INDEXED_CHARS, TS_CONFIG, fold

COLUMN_SEPARATOR = "qmdcolumnseparator"
# The separator as the tsvector holds it: English Snowball stems it. Deleting the unstemmed
# word alone (before issue 36) left it in every row, one more word in each column's length.
SEPARATOR_LEXEMES = f"ARRAY['{COLUMN_SEPARATOR}', 'qmdcolumnsepar']"

# A row's length for BM25: its tokens (every position of every lexeme), as FTS5 counts a row's
# tokens; `length(t)` counts distinct lexemes, which made a long page look short (issue 36).
# PostgreSQL keeps at most 256 positions of a lexeme, so a word repeated more counts 256.
TOKEN_COUNT = "(SELECT COALESCE(SUM(cardinality(positions)), 0) FROM unnest(t))"


def fts_vector_sql(path: str, title: str, body: str) -> str:
    """The tsvector of a row from three SQL expressions of folded text (path, title, body).

    The three columns share one tsvector; a separator word ends the first two and is deleted
    afterwards, leaving a gap in the positions so that no phrase can match across columns
    (FTS5 keeps columns apart the same way)."""
    sep = f" {COLUMN_SEPARATOR}"
    return (
        "ts_delete("
        f"setweight(to_tsvector('{TS_CONFIG}', {path} || '{sep}'), 'C') || "
        f"setweight(to_tsvector('{TS_CONFIG}', {title} || '{sep}'), 'B') || "
        f"setweight(to_tsvector('{TS_CONFIG}', {body}), 'D'), {SEPARATOR_LEXEMES})"
    )


# the upsert of full-text rows from `SELECT id, t` (t: the tsvector), with BM25's row length
FTS_UPSERT = (
    f"INSERT INTO documents_fts (id, tsv, len) SELECT id, t, {TOKEN_COUNT} FROM ({{rows}}) s "
    "ON CONFLICT (id) DO UPDATE SET tsv = excluded.tsv, len = excluded.len"
)


def fts_row_sql() -> str:
    """Parameters: id, folded path, folded title, folded body."""
    return FTS_UPSERT.format(rows=f"SELECT %s AS id, {fts_vector_sql('%s', '%s', '%s')} AS t")


def fts_params(doc_id: int, collection: str, path: str, title: str, body: str) -> tuple[Any, ...]:
    return (doc_id, fold(f"{collection}/{path}"), fold(title), fold(body[:MAX_INDEXED_CHARS]))
