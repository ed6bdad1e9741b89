"""The full-text row built in Python (adapters/postgres/tsvector.py) is the row the server
builds (`fts_vector_sql`), lexemes, positions, weights and token count alike, for words of
every kind PostgreSQL's parser tells apart, and past its limits (REQ-INDEX-BATCH-001)."""

from __future__ import annotations

import random
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from adapters.postgres.bulk import copy_rows
from adapters.postgres.fts import TOKEN_COUNT, fts_params, fts_vector_sql
from adapters.postgres.store import PostgresIndex
from adapters.postgres.tsquery import fold
from adapters.postgres.tsvector import Lexemes, document_words, fold_word, words
from domain.lexquery import space_cjk
from domain.ports import DocumentWrite
from tests.postgres_server import drop_schema, fresh_schema_url

pytestmark = pytest.mark.postgres

# words of each kind: plain, short (FTS5 leaves them unstemmed), Porter's later rules,
# numbers and what the parser might take for floats, hosts or versions, scripts other than
# Latin, CJK, characters Python counts as letters or digits and PostgreSQL may not, the column
# separator itself, and words too long to index
WORDS = [
    "running", "Runs", "RUN", "api", "the", "a", "is", "as", "us", "Is", "ls", "by", "my",
    "ay", "oy", "cs", "technology", "possibly", "Biology", "ably", "bly", "logy", "analogies",
    "1", "42", "007", "1e5", "1E10", "3e", "e5", "0x1f", "123abc", "abc123", "a1b2", "2nd",
    "Straße", "naïve", "café", "ÉCOLE", "Ωmega", "русский", "日本語", "中文abc", "한국어",
    "x²y", "①②", "٣٤٥", "ﬁle", "e\u0301t\u0301e", "İstanbul", "😀", "rate-limit", "2.8.3",
    "notes/api.md", "a_b", "foo.bar@x.com", "http://x.y/z", "qmdcolumnseparator",
    "QMDCOLUMNSEPARATOR", "a" * 3000, "é" * 1100, "ab" * 1030,
]  # fmt: skip


def _texts(seed: int, count: int) -> Iterator[tuple[str, str, str]]:
    rng = random.Random(seed)
    for n in range(count):
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 80)))
        yield f"dir {rng.choice(WORDS)}/n{n}.md", title, body
    # a word past a part's 255 positions, and past 256 once the columns are joined
    yield "p/running.md", "running " * 200, "running " * 300 + "runs"
    yield "p/x.md", "x", "w " * 254 + "end"
    # past tsvector's last position: left to the server; just short of it: built here
    yield "p/long.md", "long", "word " * 17000
    yield "p/edge.md", "edge", "w " * 16370 + "end of it"


@contextmanager
def _connection() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    url, schema = fresh_schema_url()
    index = PostgresIndex.open(url, env={})
    try:
        with index.transaction(), index.connection() as conn:
            yield conn
            conn.rollback()
    finally:
        index.close()
        drop_schema(schema)


def test_a_text_folds_word_by_word() -> None:
    ascii_text = "".join(chr(c) for c in range(128)) + " a\tb\nc\x0bd\x1fe_f"
    for path, title, body in [*_texts(3, 200), (ascii_text, ascii_text.upper(), "")]:
        for text in (path, title, body):
            assert fold(text) == " ".join(fold(word) for word in words(text)), text
            assert words(text) == re.findall(r"[^\W_]+", space_cjk(text)), text
            assert [fold_word(word) for word in words(text)] == [fold(w) for w in words(text)]


def test_the_row_built_here_is_the_row_the_server_builds() -> None:
    with _connection() as conn:
        lexemes = Lexemes()
        rows = list(_texts(7, 400))
        parts = [document_words("c", *row) for row in rows]
        lexemes.learn(conn, (part for each in parts for part in each))
        built = [lexemes.build(each) for each in parts]
        assert [n for n, b in enumerate(built) if b is None] == [len(rows) - 2]  # the long one
        conn.execute("CREATE TEMP TABLE built (n INTEGER, tsv TEXT, len INTEGER)")
        copy_rows(
            conn,
            "built",
            (("n", "int4"), ("tsv", "text"), ("len", "int4")),
            [(n, *b) for n, b in enumerate(built) if b is not None],
        )
        conn.execute("CREATE TEMP TABLE texts (n INTEGER, p TEXT, t TEXT, b TEXT)")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO texts VALUES (%s, %s, %s, %s)",
                [(n, *fts_params(0, "c", *row)[1:]) for n, row in enumerate(rows)],
            )
        vector = fts_vector_sql("x.p", "x.t", "x.b")
        differing = conn.execute(
            f"SELECT s.n, b.tsv, s.t::text, b.len, s.len FROM built b JOIN ("
            f"SELECT n, t, {TOKEN_COUNT} AS len FROM (SELECT x.n, {vector} AS t FROM texts x) v"
            ") s ON s.n = b.n WHERE b.tsv::tsvector::text <> s.t::text OR b.len <> s.len"
        ).fetchall()
        compared = conn.execute("SELECT COUNT(*) FROM built").fetchone()
    assert compared == (len(rows) - 1,)
    assert differing == [], differing[:3]


def test_a_word_learnt_once_is_not_asked_again() -> None:
    with _connection() as conn, tempfile.TemporaryFile("w+") as trace:
        lexemes = Lexemes()
        lexemes.learn(conn, [["running", "api"]])
        conn.pgconn.trace(trace.fileno())
        try:
            lexemes.learn(conn, [["running"], ["api"]])
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        assert trace.read() == ""
        assert lexemes.build([["running"], ["api"], []]) == ("'run':1C 'api':3B", 2)


def test_an_index_forgets_the_words_of_a_run_when_the_run_ends() -> None:
    """A long-lived server holds no run's vocabulary between runs."""
    url, schema = fresh_schema_url()
    index = PostgresIndex.open(url, env={})
    try:
        with index.transaction():
            index.upsert_documents("c", [DocumentWrite("a.md", "A", "h", "some words", "t", "t")])
        assert index._known_lexemes is not None
        index.tidy_lexical_index(1)
        assert index._known_lexemes is None
    finally:
        index.close()
        drop_schema(schema)
