"""The default surface's result text and `query` call shapes, wired through the composition
root over in-memory fakes: seed 000's result line carries nothing of this project's own
(REQ-SPEC-SEARCH-006), and `query` takes the original's call shape beside the seed's
(REQ-SPEC-QUERY-009)."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest

from adapters.mcp.protocol import Session
from adapters.mcp.registry import SurfaceContext, create_surface
from domain.model import Collection
from tests.fakes import InMemoryStore, app_over

# seed 000: `#abc123 85% path/to/file.md - Title`, nothing after the title
SEED_LINE = re.compile(r"^#[0-9a-f]{6} \d{1,3}% \S.* - .+$")


def _session() -> Session:
    store = InMemoryStore()
    store.put_collection(Collection("notes", "/notes"))
    store.put_collection(Collection("old", "/old", include_by_default=False))
    documents = [
        ("notes", "both.md", "Both", "cursor pagination for the list endpoints"),
        ("notes", "one.md", "One", "pagination by page number"),
        ("notes", "other.md", "Other", "nothing relevant here"),
        ("old", "legacy.md", "Legacy", "offset pagination in the first API"),
    ]
    for index, (collection, path, title, text) in enumerate(documents):
        body = f"# {title}\n\n{text}\n"
        store.upsert_document(collection, path, title, f"{index:02d}" * 32, body, "t", "t")
    services = app_over(store).services()
    return Session(create_surface("spec", services, SurfaceContext("9.9.9")))


def _call(session: Session, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reply = session.handle_message(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )
    assert reply is not None and "error" not in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


def _output_schema(session: Session, name: str) -> dict[str, Any]:
    listed = {tool["name"]: tool for tool in session.surface.tools()}
    schema: dict[str, Any] = listed[name]["outputSchema"]
    return schema


def _files(result: dict[str, Any]) -> list[str]:
    return [item["file"] for item in result["structuredContent"]["results"]]


# -- REQ-SPEC-SEARCH-006: the fill's mark is structured, never inside the seed's line ----------


def test_a_fill_result_keeps_the_seed_line_and_says_partial_beside_it() -> None:
    session = _session()
    result = _call(session, "search", {"query": "cursor pagination"})
    items = result["structuredContent"]["results"]
    assert [(i["file"], i.get("partial")) for i in items] == [
        ("notes/both.md", None),
        ("notes/one.md", True),
    ]
    head, _blank, *lines = result["content"][0]["text"].split("\n")
    assert head == 'Found 2 results for "cursor pagination":'
    assert len(lines) == 2 and all(SEED_LINE.match(line) for line in lines), lines
    assert lines[1].endswith("% notes/one.md - One")
    assert result["content"][1] == {
        "type": "text",
        "text": "Note: 1 of 2 results matches only some of the query's terms "
        "(partial: true in structuredContent)",
    }
    jsonschema.validate(result["structuredContent"], _output_schema(session, "search"))


def test_a_list_without_fill_results_has_no_note() -> None:
    result = _call(_session(), "search", {"query": "pagination"})
    assert len(result["content"]) == 1
    assert all("partial" not in item for item in result["structuredContent"]["results"])


def test_the_search_tools_declare_partial_in_their_output_schema() -> None:
    session = _session()
    for name in ("search", "vsearch", "query"):
        item = _output_schema(session, name)["properties"]["results"]["items"]
        assert item["properties"]["partial"]["type"] == "boolean", name
        assert "partial" not in item["required"], name


def test_a_failure_envelope_passes_the_output_schema_too() -> None:
    """Clients (the TypeScript SDK, the MCP Inspector) check an isError result's structured
    content against the tool's output schema as well."""
    session = _session()
    failures = [
        ("search", {"query": "pagination", "limit": 0}),
        ("vsearch", {"query": "pagination"}),  # no vector index
        ("query", {}),
    ]
    for name, arguments in failures:
        result = _call(session, name, arguments)
        assert result["isError"] is True, name
        jsonschema.validate(result["structuredContent"], _output_schema(session, name))
    with_results = _call(session, "query", {"query": "pagination"})
    jsonschema.validate(with_results["structuredContent"], _output_schema(session, "query"))
    with pytest.raises(jsonschema.ValidationError):  # neither shape: `truncated` is missing
        jsonschema.validate({"results": []}, _output_schema(session, "search"))


# -- REQ-SPEC-QUERY-009: the original's call shape -----------------------------------------


def test_query_takes_searches_without_query_as_the_original_does() -> None:
    session = _session()
    result = _call(session, "query", {"searches": [{"type": "lex", "query": "pagination"}]})
    assert "isError" not in result
    assert set(_files(result)) == {"notes/both.md", "notes/one.md"}
    assert result["content"][0]["text"].startswith('Found 2 results for "pagination":\n\n#')
    jsonschema.validate(result["structuredContent"], _output_schema(session, "query"))


def test_without_query_the_first_lex_search_ranks_and_names_the_answer() -> None:
    searches = [
        {"type": "vec", "query": "how are long lists split"},
        {"type": "lex", "query": "cursor"},
    ]
    result = _call(_session(), "query", {"searches": searches, "rerank": False})
    assert "isError" not in result
    assert result["content"][0]["text"].startswith('Found 1 result for "cursor":')
    assert _files(result) == ["notes/both.md"]


def test_query_takes_the_originals_collections() -> None:
    session = _session()
    lex = [{"type": "lex", "query": "pagination"}]
    assert _files(_call(session, "query", {"searches": lex, "collections": ["old"]})) == [
        "old/legacy.md"
    ]
    both = _call(session, "query", {"query": "pagination", "collections": ["notes", "old"]})
    assert set(_files(both)) == {"notes/both.md", "notes/one.md", "old/legacy.md"}


def test_query_refusals_are_envelopes_that_say_what_to_send() -> None:
    session = _session()
    lex = [{"type": "lex", "query": "pagination"}]
    refusals = [
        (
            {},
            "invalid-argument",
            "give query (a natural-language query) or searches (typed sub-queries)",
        ),
        (
            {"searches": []},
            "invalid-argument",
            "give query (a natural-language query) or searches (typed sub-queries)",
        ),
        ({"searches": lex, "collections": ["nope"]}, "not-found", "Collection not found: nope"),
        (
            {"searches": lex, "collection": "notes", "collections": ["old"]},
            "invalid-argument",
            "give collection (one) or collections (any of several), not both",
        ),
        (
            {"searches": [{"type": "lex", "query": " "}]},
            "invalid-argument",
            "searches[0]: query must not be empty",
        ),
    ]
    for arguments, code, message in refusals:
        result = _call(session, "query", arguments)
        assert result["isError"] is True, arguments
        assert result["structuredContent"]["error"] == {"code": code, "message": message}


def test_the_seed_shape_still_requires_nothing_new() -> None:
    result = _call(_session(), "query", {"query": "pagination", "collection": "notes"})
    assert set(_files(result)) == {"notes/both.md", "notes/one.md"}
