"""A SQLite index reads each lexical hit's metadata with the hit only while its connection knows
the metadata table (REQ-FILTER-006, REQ-META-004): an index without the table (the original's)
is searched as it is, the surface reads the results' metadata by id, and the table one first
write makes, in this process or another, is joined from then on; a table the connection was
wrong about (its first write rolled back) costs no search its answer."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from adapters.mcp.formatting import results_metadata
from adapters.sqlite.metadata import METADATA_TABLE
from adapters.sqlite.store import SqliteIndex
from domain.lexquery import parse_lex_query
from domain.usecases.search import Searcher, SearchRequest

T0 = "2025-01-01T00:00:00.000Z"


def _add(index: SqliteIndex, path: str, body: str) -> int:
    digest = hashlib.sha256(body.encode()).hexdigest()
    index.upsert_document("c", path, path, digest, body, T0, T0)
    meta = index.document_by_path("c", path)
    assert meta is not None
    return meta.id


def _tables(index: SqliteIndex) -> set[str]:
    rows = index.connection.query("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {str(name) for (name,) in rows}


def test_an_index_without_the_table_is_searched_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    index = SqliteIndex.open(path)
    try:
        doc = _add(index, "a.md", "kumquat orchard")
        (hit,) = index.search_lex(parse_lex_query("kumquat"), 5, None)
        assert hit.metadata is None  # not read: the index has no metadata table
        assert METADATA_TABLE not in _tables(index)  # and the search made none
        # another process writes the index's first metadata while this one serves it
        writer = SqliteIndex.open(path)
        try:
            writer.put_metadata("c", "a.md", {"author": "Ana"})
        finally:
            writer.close()
        (hit,) = index.search_lex(parse_lex_query("kumquat"), 5, None)
        assert hit.metadata is None  # this connection has not seen the table yet
        searcher = Searcher(index, index, index)
        results = searcher.lex_search("kumquat", SearchRequest(limit=5))
        # what a surface shows: read by id, which looks for the table again
        assert results_metadata(results, index.metadata_by_id) == {doc: {"author": "Ana"}}
        (hit,) = index.search_lex(parse_lex_query("kumquat"), 5, None)
        assert hit.metadata == {"author": "Ana"}  # known now: read with the hit
    finally:
        index.close()


def test_a_table_whose_first_write_rolled_back_costs_no_answer(tmp_path: Path) -> None:
    index = SqliteIndex.open(tmp_path / "index.sqlite")
    try:
        _add(index, "a.md", "kumquat orchard")
        with pytest.raises(RuntimeError), index.transaction():
            index.put_metadata("c", "a.md", {"author": "Ana"})
            raise RuntimeError("the write failed")
        assert METADATA_TABLE not in _tables(index)
        (hit,) = index.search_lex(parse_lex_query("kumquat"), 5, None)
        assert hit.metadata is None
        assert METADATA_TABLE not in index.connection.schema_names
        index.put_metadata("c", "a.md", {"author": "Bo"})
        (hit,) = index.search_lex(parse_lex_query("kumquat"), 5, None)
        assert hit.metadata == {"author": "Bo"}
    finally:
        index.close()
