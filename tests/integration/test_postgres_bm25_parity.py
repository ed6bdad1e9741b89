"""PostgreSQL ranks a lexical search as SQLite's FTS5 does (issue 36): the same ids in the same
order, with the same BM25 scores, on a small corpus built to tell the old ranking apart.

What the old ranking got wrong, each a case here: a page that names a word many times lost to
one that names it once in its title (`ts_rank` counts the j-th occurrence as w / j^2), a word
in most documents still counted (Lucene's idf where FTS5 floors it), and a long page looked
short (its distinct lexemes counted as its length), and a dotted token (`2.8.3`) was one
clause with one idf where FTS5 scores each part. The words are ones Porter's stemmer (FTS5)
and Snowball's (PostgreSQL) stem alike: "files" and "file", "opened" and "open", "loops"; and
two-letter words, which FTS5 does not stem at all ("ls", "is"), and the two rules of Porter's
later algorithm that FTS5 follows ("technology" -> `technolog`, "possibly" -> `possibl`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from adapters.postgres.store import PostgresIndex
from adapters.sqlite.store import SqliteIndex
from domain.lexquery import parse_lex_query
from domain.model import LexHit
from domain.text import content_hash, extract_title
from tests.postgres_server import drop_schema, fresh_schema_url

pytestmark = pytest.mark.postgres
T0 = "2025-01-01T00:00:00.000Z"

FILLER = " ".join(f"w{k}" for k in range(60))
PAGES = {
    # tldr's page: short, the three words once each and in its description
    "lsof.md": "# lsof\n\n> List open files and the processes that opened them.\n\n"
    "- List all open files: `lsof`\n- Find who opened a file: `lsof path/to/file`\n",
    "ls.md": "# ls\n\n> List directory contents.\n\n- List files: `ls -1`\n"
    "- List all files, hidden files too: `ls -a`\n",
    # a long page that names each word once among much else
    "release.md": "# Release notes\n\n" + FILLER + " the open source files list " + FILLER + "\n",
    # a page about the event loop against one that names it once, in its title
    "pep.md": "# Asynchronous IO\n\n" + " ".join(["the event loop runs callbacks"] * 8) + "\n",
    "node.md": "# Event loop fixes\n\nThe v0.4 release. " + FILLER + "\n",
    "loops.md": "# Loops\n\nFor loops and while loops; an event handler.\n",
    # "the" is in every page: FTS5 gives it (almost) no weight
    "misc.md": "# Misc\n\nthe the the open\n",
    # a dotted token's parts: FTS5 scores each apart, and the clause matches whole
    "v283.md": "# Version 2.8.3\n\nqmd 2.8.3 fixes the event loop; see 2.8 and 3.0.\n",
    "v28.md": "# Version 2.8\n\n2 8 8 8 3 files\n",
    # two-letter words FTS5 does not stem and Snowball's porter did (`ls` -> `l`, `is` -> `i`,
    # `as` -> `a`), so `ls` matched every `-l` flag and `is*` every word in `i`
    "ps.md": "# ps\n\n> Information about running processes. It is as plain as `ps aux`.\n\n"
    "- Long format: `ps -l`\n- A tree: `ps -ejH`\n",
    "island.md": "# Island\n\nAn island is a piece of land; ids and isbn numbers. I am.\n",
    # a prefix term that folds into several words completes its last word, as in FTS5
    "sizes.md": "# Sizes\n\nThe file size, the file's owner, the file system and a file.\n",
    # FTS5 stems `using` to `us`, as it keeps the word `us`: one token for both
    "using.md": "# Using it\n\nUsing the tool with us; uses of it.\n",
    # Porter's later rules, FTS5's: `technology` and `technological` share `technolog`,
    # `possibly` and `possible` share `possibl`, `assembly` and `assembled` `assembl`
    "biology.md": "# Technologies\n\nTechnological biology, possibly the assembly line.\n",
    "possible.md": "# Possible\n\nIt is possible; the technolog team assembled it.\n",
}
QUERIES = [
    "list open files",
    "event loop",
    "files",
    "file",
    "opened",
    "loops",
    "the open",
    '"event loop"',
    "lis*",
    "event -fixes",
    "2.8.3",
    "2.8.3 files",
    "event 2.8 -fixes",
    "ls",
    "is",
    "as",
    "i",
    '"it is as"',
    "ps -ls",
    "file's",
    "file's -size",
    "us",
    '"us"',
    "using",
    "technology",
    '"technologies"',
    "possibly",
    '"possibly"',
    "assembly",
    "biology",
]


@pytest.fixture
def both(tmp_path: Path) -> Iterator[tuple[SqliteIndex, PostgresIndex]]:
    url, schema = fresh_schema_url()
    sqlite = SqliteIndex.open(tmp_path / "index.sqlite")
    pg = PostgresIndex.open(url, env={})
    try:
        for store in (sqlite, pg):
            for path, body in PAGES.items():
                title = extract_title(body, path)
                store.upsert_document("c", path, title, content_hash(body), body, T0, T0)
        yield sqlite, pg
    finally:
        sqlite.close()
        pg.close()
        drop_schema(schema)


def _ranked(hits: list[LexHit]) -> list[tuple[str, float]]:
    return [(hit.document.meta.path, hit.bm25) for hit in hits]


@pytest.mark.parametrize("text", QUERIES)
def test_postgres_ranks_as_sqlite_with_the_same_scores(
    both: tuple[SqliteIndex, PostgresIndex], text: str
) -> None:
    sqlite, pg = both
    for any_term in (False, True):
        query = replace(parse_lex_query(text), match_any=any_term)
        expected = _ranked(sqlite.search_lex(query, 10, None))
        got = _ranked(pg.search_lex(query, 10, None))
        assert [path for path, _ in got] == [path for path, _ in expected], (text, any_term)
        for (_, mine), (_, theirs) in zip(got, expected, strict=True):
            assert mine == pytest.approx(theirs, rel=1e-6, abs=1e-9), (text, any_term)


def test_the_lsof_page_comes_first_for_list_open_files(
    both: tuple[SqliteIndex, PostgresIndex],
) -> None:
    for index in both:
        hits = index.search_lex(parse_lex_query("list open files"), 3, None)
        assert hits[0].document.meta.path == "lsof.md"
        hits = index.search_lex(parse_lex_query("event loop"), 3, None)
        assert hits[0].document.meta.path == "pep.md"
