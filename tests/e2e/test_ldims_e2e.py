"""`qmd mcp --surface ldims` as a real process, driven by the official `mcp` client over stdio
and Streamable HTTP: seed 003's two-step flow (search, then read the extracted content), its
filters, empty results and errors (docs/spec/ldims.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from adapters.bootstrap import build_app
from adapters.mcp.ldims import SEMANTIC_FLOOR
from tests.fake_openai import serve
from tests.guarantees import tool_names
from tests.http_harness import HttpServer
from tests.mcp_harness import REPO, StdioServer, build_fixture_index, fixture_env

DOCS = {
    "sales/q4-strategy.md": "---\ndate: 2023-12-01T10:00:00Z\nauthor: John Doe\n"
    "documentType: Strategy Document\n---\n# Q4 2023 Sales Strategy\n\n"
    "The fourth quarter sales strategy focuses on renewals and key accounts.\n",
    "sales/q3-review.md": "---\ndate: 2023-09-15\nauthor: Jane Roe\n---\n# Q3 Review\n\n"
    "Third quarter sales review: renewals slipped, key accounts grew.\n",
    "support/service-plan.md": "---\ndate: 2024-02-01\nauthor: [Ana, Bo]\ntags: [support]\n---\n"
    "# Customer Service Improvement Plan\n\nKey metrics: first response time, resolution "
    "rate and customer satisfaction for sales accounts.\n",
    "notes.txt": "plain notes about sales in a text file\n",
}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("ldims")
    for name, text in DOCS.items():
        target = root / "docs" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    environment = fixture_env(root)
    app = build_app(env=environment, with_models=False)
    try:
        app.collections.add(str(root / "docs"), "ldims", "**/*.{md,txt}")
    finally:
        app.close()
    return environment


def _payload(result: Any) -> dict[str, Any]:
    assert len(result.content) == 1 and result.content[0].type == "text"
    parsed: dict[str, Any] = json.loads(result.content[0].text)
    return parsed


async def _two_step_flow(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == tool_names("ldims")
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["ldims://docs/{document_id}/extracted_content"]
    # scenario 1: find documents, by meaning or keywords, narrowed by submitter and date
    found = _payload(
        await client.call_tool(
            "searchDocuments",
            {
                "query": "sales strategy",
                "maxResults": 3,
                "filters": {
                    "submitter": "John Doe",
                    "dateFrom": "2023-11-01",
                    "dateTo": "2023-12-31",
                },
            },
        )
    )
    assert found["isError"] is False and found["totalMatches"] == 1
    [hit] = found["results"]
    assert hit["documentId"] == "ldims/sales/q4-strategy.md"
    assert hit["documentName"] == "q4-strategy.md"
    assert hit["metadata"] == {
        "createdAt": "2023-12-01T10:00:00Z",
        "submitter": "John Doe",
        "documentType": "Strategy Document",
    }
    assert "sales strategy" in hit["matchedContext"].lower()
    assert found["searchMetadata"]["searchMode"] == "semantic"
    assert found["searchMetadata"]["effectiveSearchMode"] == "exact"  # no vectors here
    # list authors match each of their names; document types match the file format
    ana = _payload(
        await client.call_tool(
            "searchDocuments", {"query": "metrics", "filters": {"submitter": "Bo"}}
        )
    )
    assert [r["documentId"] for r in ana["results"]] == ["ldims/support/service-plan.md"]
    assert ana["results"][0]["metadata"]["submitter"] == "Ana, Bo"
    text = _payload(
        await client.call_tool(
            "searchDocuments",
            {"query": "sales", "filters": {"documentType": "txt", "searchMode": "exact"}},
        )
    )
    assert [r["documentId"] for r in text["results"]] == ["ldims/notes.txt"]
    assert text["results"][0]["metadata"]["documentType"] == "txt"
    # scenario 2: read the chosen document's extracted content
    uri = "ldims://docs/ldims%2Fsales%2Fq4-strategy.md/extracted_content"
    content = (await client.read_resource(uri)).contents[0]
    assert "renewals and key accounts" in content.text  # type: ignore[union-attr]
    described = (content.meta or {})["ldims/metadata"]
    assert described == {
        "documentName": "q4-strategy.md",
        "extractedAt": described["extractedAt"],
        "format": "md",
    }
    assert described["extractedAt"].endswith("Z")
    missing = await client.read_resource("ldims://docs/ldims%2Fnope.md/extracted_content")
    assert json.loads(missing.contents[0].text)["errorCode"] == "RESOURCE_NOT_FOUND"  # type: ignore[union-attr]
    # an empty result is a success; bad input is the seed's INVALID_INPUT
    empty = await client.call_tool("searchDocuments", {"query": "zebra giraffe"})
    assert empty.is_error is not True
    assert _payload(empty)["results"] == [] and _payload(empty)["totalMatches"] == 0
    bad = await client.call_tool("searchDocuments", {"query": "sales", "maxResults": -1})
    assert bad.is_error is True
    assert _payload(bad)["errorCode"] == "INVALID_INPUT"
    assert _payload(bad)["errorDetails"]["field"] == "maxResults"


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # auto: the 2026-07-28 revision
async def test_official_client_over_stdio(env: dict[str, str], mode: str) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "adapters.cli.main", "mcp", "--surface", "ldims"],
        env=env,
        cwd=str(REPO),
    )
    async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
        await _two_step_flow(client)


@pytest.fixture(scope="module")
def http_server(env: dict[str, str]) -> Iterator[HttpServer]:
    server = HttpServer(["mcp", "--surface", "ldims", "--http", "--port", "0"], env).start()
    yield server
    server.stop()


@pytest.mark.parametrize("mode", ["auto"])
async def test_official_client_over_http(http_server: HttpServer, mode: str) -> None:
    async with Client(http_server.url, mode=mode) as client:
        await _two_step_flow(client)


def test_hard_limit_and_timeout_come_from_the_environment(env: dict[str, str]) -> None:
    """REQ-LDIMS-TOOL-002 and REQ-LDIMS-ERR-003: the seed's .env settings."""
    capped = StdioServer({**env, "SEARCH_MAX_RESULTS_HARD_LIMIT": "2"}, "--surface", "ldims")
    try:
        capped.initialize()
        result = capped.call("searchDocuments", {"query": "sales", "maxResults": 10})
        payload = json.loads(result["content"][0]["text"])
        assert len(payload["results"]) == 2 and payload["totalMatches"] == 2
        assert payload["searchMetadata"]["maxResultsCappedAt"] == 2
    finally:
        capped.kill()
    # a limit no search meets: the surface answers at the limit, before the transport's own
    # (OWN_TIMEOUT_GRACE_S later), so the answer is LDIMS's
    hurried = StdioServer({**env, "MCP_REQUEST_TIMEOUT_SECONDS": "0.000001"}, "--surface", "ldims")
    try:
        hurried.initialize()
        result = hurried.call("searchDocuments", {"query": "sales"})
        assert result["isError"] is True
        assert json.loads(result["content"][0]["text"]) == {
            "isError": True,
            "errorCode": "SEARCH_TIMEOUT",
            "errorMessage": "The search operation timed out before results could be retrieved.",
            "errorDetails": {"timeoutSeconds": 1e-06},
        }
    finally:
        hurried.kill()


def test_hard_limit_and_timeout_come_from_the_flags_too(env: dict[str, str]) -> None:
    """REQ-LDIMS-TOOL-002 and REQ-LDIMS-ERR-003 with `--max-results` and `--request-timeout`,
    which win over seed 003's variables as every server setting's flag does."""
    capped = StdioServer(
        {**env, "SEARCH_MAX_RESULTS_HARD_LIMIT": "5"}, "--surface", "ldims", "--max-results", "3"
    )
    try:
        capped.initialize()
        result = capped.call("searchDocuments", {"query": "sales", "maxResults": 10})
        payload = json.loads(result["content"][0]["text"])
        assert payload["searchMetadata"]["maxResultsCappedAt"] == 3
        assert len(payload["results"]) <= 3
    finally:
        capped.kill()
    hurried = StdioServer(env, "--surface", "ldims", "--request-timeout", "0.000001")
    try:
        hurried.initialize()
        result = hurried.call("searchDocuments", {"query": "sales"})
        assert json.loads(result["content"][0]["text"])["errorCode"] == "SEARCH_TIMEOUT"
        assert json.loads(result["content"][0]["text"])["errorDetails"] == {"timeoutSeconds": 1e-06}
    finally:
        hurried.kill()


EMBED_MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"


def test_search_timeout_comes_at_the_configured_time_on_a_real_process(
    tmp_path: Path,
) -> None:
    """REQ-LDIMS-ERR-003 with a search that really runs long (its embedding server answers
    after 4 s) and MCP_REQUEST_TIMEOUT_SECONDS=1: the seed's SEARCH_TIMEOUT after 1 s, not the
    transport's -32001, and not when the search ends."""
    _corpora, env = build_fixture_index(tmp_path)
    server, handler = serve()
    try:
        env["QMD_EMBED_MODEL"] = f"openai:hashed@{handler.url}"
        embedded = subprocess.run(
            [sys.executable, "-m", "adapters.cli.main", "embed"],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert embedded.returncode == 0, embedded.stderr
        handler.embed_delay_s = 4.0
        ldims = StdioServer({**env, "MCP_REQUEST_TIMEOUT_SECONDS": "1"}, "--surface", "ldims")
        try:
            ldims.initialize()
            began = time.monotonic()
            result = ldims.call("searchDocuments", {"query": "rate limits"}, timeout=30)
            took = time.monotonic() - began
            assert json.loads(result["content"][0]["text"])["errorCode"] == "SEARCH_TIMEOUT"
            assert 1.0 <= took < 1.8, took
        finally:
            ldims.kill()
    finally:
        server.shutdown()


@pytest.mark.models
def test_semantic_mode_answers_nothing_for_a_question_nothing_is_about(tmp_path: Path) -> None:
    """REQ-LDIMS-TOOL-006 with the bundled embedding model (all-MiniLM-L6-v2), the model its
    floor was calibrated for: unrelated questions get the empty success, related ones their
    page with a relevance score above the floor."""
    if not EMBED_MODEL.is_file():
        pytest.fail(f"{EMBED_MODEL.name} missing; run: python scripts/prepare_models.py")
    _corpora, env = build_fixture_index(tmp_path)
    env["QMD_EMBED_MODEL"] = str(EMBED_MODEL)
    embedded = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", "embed"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert embedded.returncode == 0, embedded.stderr
    ldims = StdioServer(env, "--surface", "ldims")
    try:
        ldims.initialize()

        def search(query: str) -> dict[str, Any]:
            result = ldims.call("searchDocuments", {"query": query}, timeout=300)
            assert "isError" not in result, result
            payload: dict[str, Any] = json.loads(result["content"][0]["text"])
            assert "effectiveSearchMode" not in payload["searchMetadata"]  # vectors were used
            return payload

        for query in ("zxqv blorptastic flumwhistle", "chocolate cake recipe with frosting"):
            empty = search(query)
            assert empty["results"] == [] and empty["totalMatches"] == 0, (query, empty)
        found = search("How many calls per minute may one client key make?")
        top = found["results"][0]
        assert top["documentId"] == "handbook/engineering/api/rate limits.md"
        assert SEMANTIC_FLOOR <= top["relevanceScore"] <= 1.0
        scores = [r["relevanceScore"] for r in found["results"]]
        assert all(s >= SEMANTIC_FLOOR for s in scores)
        # REQ-LDIMS-TOOL-007: the most relevant first, on the hybrid search too
        broad = search("the layers of the search service and its cache")
        ranked = [r["relevanceScore"] for r in broad["results"]]
        assert len(ranked) >= 2 and ranked == sorted(ranked, reverse=True), broad
    finally:
        ldims.kill()
