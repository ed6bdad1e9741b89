"""A batch of documents written at once on PostgreSQL (`upsert_documents`, REQ-INDEX-BATCH-001).

Row by row, each document cost four round trips (its row looked up, its content, its row,
its full-text row read back and written) and each full-text statement fired the triggers
that keep BM25's figures: 100,000 documents took 4.2 times SQLite's time (issue 36). Here a
batch is one COPY into a temporary table and a fixed number of set-based statements, whatever
its size:

1. the batch's rows already indexed are read (one SELECT), and each document's outcome is
   decided as `upsert_document` decides it;
2. what must be written goes into a temporary table by binary COPY, with each document's
   tsvector already built (adapters/postgres/tsvector.py: the words new to the index are
   analysed by the server once, in one statement, and each row is put together in Python);
   a text past tsvector's positions goes as its folded columns, for the server to build;
3. new bodies into `content`, new rows into `documents` (an inactive row at the same path
   comes back, as row by row), changed rows updated;
4. one INSERT writes every full-text row (no `to_tsvector`: the server reads the built
   rows, a tenth of the work): the statement-level triggers of `documents_fts`
   (schema migrations 6 and 9) then queue the batch's lexemes once, and the transaction's
   commit folds them into `fts_lexemes` once: one pass per batch, not one per document.

Everything runs in the caller's transaction (one per batch in `qmd update`'s loop): an
interrupted run leaves the batches committed before it, each whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import Any

import psycopg

from adapters.postgres.bulk import copy_buffer, copy_data
from adapters.postgres.fts import TOKEN_COUNT, fts_params, fts_vector_sql
from adapters.postgres.tsvector import Lexemes, document_words
from domain.ports import DocumentWrite, UpsertOutcome

# what a written document needs: a new row, a new body, or its title alone
_NEW, _CONTENT, _TITLE = 1, 2, 3

_STAGING_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ord", "int4"),
    ("kind", "int4"),
    ("id", "int8"),
    ("path", "text"),
    ("title", "text"),
    ("hash", "text"),
    ("body", "text"),
    ("created_at", "text"),
    ("modified_at", "text"),
    ("tsv", "text"),
    ("len", "int4"),
    ("fts_path", "text"),
    ("fts_title", "text"),
    ("fts_body", "text"),
)
_SQL_TYPES = {"int8": "BIGINT", "int4": "INTEGER", "text": "TEXT"}
# (a table of an earlier layout left in the session would not take this COPY: the name
# changes with the columns)
_STAGING = "qmd_batch_" + str(len(_STAGING_COLUMNS))
_CREATE_STAGING = (
    f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} ("
    + ", ".join(f"{name} {_SQL_TYPES[kind]}" for name, kind in _STAGING_COLUMNS)
    + ") ON COMMIT DELETE ROWS"
)
_B = f"pg_temp.{_STAGING}"
# A batch of at least _ROUNDS * _ROUND_MIN documents to write is written in _ROUNDS rounds
# (a fixed number of statements still), each round's rows put together while the server
# writes the previous one's.
_ROUNDS = 4
_ROUND_MIN = 32
# An indexing run's transactions are committed without waiting for their WAL to be flushed:
# a crash of the server (or the machine) may lose the last ones, whole, as SQLite's WAL with
# `synchronous = NORMAL` may (docs/reliability.md); never half of one, and the next update
# reads again what they wrote. Waiting cost 6 ms and more per commit (issue 36).
_DURABILITY = "SET LOCAL synchronous_commit = off"


def unique_runs(documents: Sequence[DocumentWrite]) -> list[list[DocumentWrite]]:
    """The documents cut into runs without a repeated path, in order: a path written twice
    is written by two batches, the second seeing the first, as row by row."""
    runs: list[list[DocumentWrite]] = [[]]
    seen: set[str] = set()
    for document in documents:
        if document.path in seen:
            runs.append([])
            seen.clear()
        runs[-1].append(document)
        seen.add(document.path)
    return [run for run in runs if run]


def upsert_batch(
    conn: psycopg.Connection[tuple[Any, ...]],
    collection: str,
    documents: Sequence[DocumentWrite],
    lexemes: Lexemes,
) -> list[UpsertOutcome]:
    """Write `documents` (no path twice) of `collection` in the connection's transaction;
    their outcomes, in order. `lexemes`: the index's words met so far (tsvector.py)."""
    paths = [d.path for d in documents]
    indexed: dict[str, tuple[int, str, str]] = {
        str(path): (int(doc_id), str(digest), str(title))
        for doc_id, path, digest, title in conn.execute(
            "SELECT id, path, hash, title FROM documents "
            "WHERE collection = %s AND path = ANY(%s) AND active = 1",
            (collection, paths),
        ).fetchall()
    }
    outcomes: list[UpsertOutcome] = []
    written: list[tuple[int, int, int | None, DocumentWrite]] = []
    for ord_, d in enumerate(documents):
        known = indexed.get(d.path)
        if known is None:
            kind, doc_id = _NEW, None
        elif known[1] != d.content_hash:
            kind, doc_id = _CONTENT, known[0]
        elif known[2] != d.title:
            kind, doc_id = _TITLE, known[0]
        else:
            outcomes.append(UpsertOutcome("unchanged"))
            continue
        outcomes.append(UpsertOutcome("indexed" if kind == _NEW else "updated"))
        written.append((ord_, kind, doc_id, d))
    if not written:
        return outcomes
    texts = [document_words(collection, d.path, d.title, d.body) for *_, d in written]
    lexemes.learn(conn, (part for parts in texts for part in parts))
    # the staging table emptied of an earlier batch of the same transaction; the commit not
    # waiting for its WAL to reach the disk, SQLite's `synchronous = NORMAL` (see `_DURABILITY`)
    conn.execute(f"{_CREATE_STAGING}; DELETE FROM {_B}; {_DURABILITY}")
    count = _ROUNDS if len(written) >= _ROUNDS * _ROUND_MIN else 1
    bounds = [len(written) * n // count for n in range(count + 1)]
    rounds = [(written[start:end], texts[start:end]) for start, end in pairwise(bounds)]
    # the next round's rows are put together while the server writes this round's: the
    # client's work and the server's overlap (on two cores, at the same time)
    with ThreadPoolExecutor(max_workers=1) as worker:
        coming = worker.submit(_staged, collection, lexemes, *rounds[0])
        for n in range(count):
            staged, copied = coming.result()
            if n + 1 < count:
                coming = worker.submit(_staged, collection, lexemes, *rounds[n + 1])
            if n:
                conn.execute(f"DELETE FROM {_B}")
            copy_data(conn, _STAGING, _STAGING_COLUMNS, copied)
            _write_round(conn, collection, any(row[1] == _NEW for row in staged))
    return outcomes


def _staged(
    collection: str,
    lexemes: Lexemes,
    written: Sequence[tuple[int, int, int | None, DocumentWrite]],
    texts: Sequence[Sequence[Sequence[str]]],
) -> tuple[list[tuple[Any, ...]], bytes]:
    """A round's staging rows, and their COPY data."""
    staged: list[tuple[Any, ...]] = []
    for (ord_, kind, doc_id, d), parts in zip(written, texts, strict=True):
        row = lexemes.build(parts)
        # a text past tsvector's positions: the server computes its row (`fts_vector_sql`)
        folded = fts_params(0, collection, d.path, d.title, d.body)[1:] if row is None else ()
        staged.append(
            (
                ord_,
                kind,
                doc_id,
                d.path,
                d.title,
                d.content_hash,
                None if kind == _TITLE else d.body,
                d.created_at,
                d.modified_at,
                *(row or (None, None)),
                *(folded or (None, None, None)),
            )
        )
    return staged, copy_buffer(_STAGING_COLUMNS, staged)


def _write_round(conn: psycopg.Connection[tuple[Any, ...]], collection: str, new: bool) -> None:
    """The staged rows written: bodies, changed rows, new rows, full-text rows."""
    # a body is stored once; two documents of the batch sharing it store the first one's date
    conn.execute(
        "INSERT INTO content (hash, doc, created_at) SELECT hash, body, modified_at FROM ("
        f"SELECT DISTINCT ON (hash) hash, body, modified_at FROM {_B}"
        f" WHERE kind <> {_TITLE} ORDER BY hash, ord) b ORDER BY hash "
        "ON CONFLICT (hash) DO NOTHING"
    )
    conn.execute(
        f"UPDATE documents d SET title = b.title, hash = b.hash, modified_at = b.modified_at"
        f" FROM {_B} b WHERE d.id = b.id AND b.kind <> {_NEW}"
    )
    if new:
        # ids in the batch's order, as row by row; ON CONFLICT: an inactive row comes back
        conn.execute(
            "WITH added AS (INSERT INTO documents"
            " (collection, path, title, hash, created_at, modified_at, active)"
            f" SELECT %s, path, title, hash, created_at, modified_at, 1 FROM {_B}"
            f" WHERE kind = {_NEW} ORDER BY ord"
            " ON CONFLICT (collection, path) DO UPDATE SET title = excluded.title,"
            " hash = excluded.hash, modified_at = excluded.modified_at, active = 1"
            f" RETURNING id, path) UPDATE {_B} b SET id = added.id FROM added"
            " WHERE b.path = added.path",
            (collection,),
        )
    vector = fts_vector_sql("b.fts_path", "b.fts_title", "b.fts_body")
    conn.execute(
        f"INSERT INTO documents_fts (id, tsv, len) SELECT id, t, COALESCE(n, {TOKEN_COUNT})"
        f" FROM (SELECT b.id, COALESCE(b.tsv::tsvector, {vector}) AS t, b.len AS n FROM {_B} b"
        " ORDER BY b.id) s ON CONFLICT (id) DO UPDATE SET tsv = excluded.tsv, len = excluded.len"
    )
