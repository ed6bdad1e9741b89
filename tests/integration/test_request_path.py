"""One warm HTTP `tools/call search` stays a short, straight path (issue 35): the SQL it runs
and the project files its code runs in, measured by tests/request_path.py. The budgets are the
figures after the issue's work; a change that adds a read or a layer to every search fails
here and must say why (benchmarks/README.md, "The HTTP search request path")."""

from __future__ import annotations

import pytest

from tests.request_path import RequestCost, measure

SQL_BUDGET = 2
FILES_BUDGET = 15


@pytest.fixture(scope="module")
def cost() -> RequestCost:
    return measure()


def test_the_search_answers(cost: RequestCost) -> None:
    result = cost.reply["result"]
    assert not result.get("isError"), result
    assert result["structuredContent"]["results"], result


def test_one_warm_search_runs_at_most_the_sql_budget(cost: RequestCost) -> None:
    assert len(cost.statements) <= SQL_BUDGET, cost.statements


def test_the_schema_is_not_probed_on_every_request(cost: RequestCost) -> None:
    # the metadata table's existence is kept on the connection once seen
    assert not [s for s in cost.statements if "sqlite_master" in s], cost.statements


def test_the_collections_are_read_once_per_request(cost: RequestCost) -> None:
    # the results' contexts come from the list the request read to pick its collections, the
    # global context from the same statement
    reads = [s for s in cost.statements if "store_collections" in s or "store_config" in s]
    assert len(reads) == 1, cost.statements


def test_the_results_metadata_comes_with_the_hits(cost: RequestCost) -> None:
    # REQ-FILTER-006: shown from what the lexical statement read, with no read of its own
    found = cost.reply["result"]["structuredContent"]["results"]
    assert any(hit.get("metadata") for hit in found), found
    assert not [s for s in cost.statements if "py_document_metadata WHERE" in s], cost.statements


def test_the_query_is_parsed_once(cost: RequestCost) -> None:
    # checked and searched with the one parse (the bounds check returns it)
    assert cost.calls.get("domain/lexquery.py:parse_lex_query") == 1, cost.calls


def test_a_global_context_another_process_sets_is_seen_by_the_next_search() -> None:
    # the global context is read with the collections on every request, never kept between
    # requests: a `qmd context add /` while the server runs shows on its next answer
    changed = measure(global_context="Set while the server ran")
    found = changed.reply["result"]["structuredContent"]["results"]
    assert found and {hit["context"] for hit in found} == {"Set while the server ran"}, found
    assert len(changed.statements) <= SQL_BUDGET, changed.statements


def test_a_filtered_search_builds_no_second_searcher() -> None:
    # the filter's documents go down the search legs to the index (REQ-FILTER-003)
    tags = {"key": "tags", "operator": "all", "value": ["fixture"]}
    filtered = measure("frontmatter", metadata_filter=tags)
    found = filtered.reply["result"]["structuredContent"]["results"]
    assert [hit["file"] for hit in found] == ["handbook/notes/frontmatter.md"], found
    assert "domain/usecases/search.py:Searcher.__init__" not in filtered.calls, filtered.calls


def test_one_warm_search_runs_in_at_most_the_files_budget(cost: RequestCost) -> None:
    assert len(cost.files) <= FILES_BUDGET, cost.files
