"""`qmd mcp` as a real process over stdin/stdout: every tool, the resource, the prompt, the
JSON-RPC error rules of seed 001, both protocol eras, and the official `mcp` client."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters

from tests.guarantees import tool_examples, tool_names
from tests.mcp_harness import REPO, StdioServer, build_fixture_index

# the registered names of the surfaces these tests start (`qmd mcp`, `--compat 2.8.3`)
SPEC, COMPAT = "spec", "compat-2.8.3"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    return build_fixture_index(tmp_path_factory.mktemp("mcp-e2e"))


@pytest.fixture
def server(indexed: tuple[Path, dict[str, str]]) -> Iterator[StdioServer]:
    process = StdioServer(indexed[1])
    yield process
    process.kill()


@pytest.fixture
def compat(indexed: tuple[Path, dict[str, str]]) -> Iterator[StdioServer]:
    process = StdioServer(indexed[1], "--compat", "2.8.3")
    yield process
    process.kill()


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(item["text"] for item in result["content"] if item["type"] == "text")


# -- handshake and listings ---------------------------------------------------------------


def test_initialize_echoes_a_supported_version_and_names_the_server(server: StdioServer) -> None:
    reply = server.initialize("2025-06-18")
    assert reply["result"]["protocolVersion"] == "2025-06-18"
    assert reply["result"]["serverInfo"]["name"] == "qmd"
    assert set(reply["result"]["capabilities"]) == {"tools", "resources", "prompts"}


def test_initialize_with_unknown_version_answers_the_latest(server: StdioServer) -> None:
    assert server.initialize("1999-01-01")["result"]["protocolVersion"] == "2025-11-25"


def test_spec_surface_lists_its_tools_one_template_and_the_prompt(server: StdioServer) -> None:
    server.initialize()
    tools = server.request("tools/list")["result"]["tools"]
    # the declared tools in declaration order (conformance's spec.tools-list pins the six)
    assert [t["name"] for t in tools] == tool_names(SPEC)
    templates = server.request("resources/templates/list")["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["qmd://{+path}"]
    assert server.request("resources/list")["result"] == {"resources": []}
    prompts = server.request("prompts/list")["result"]["prompts"]
    assert [p["name"] for p in prompts] == ["query"]


def test_prompt_query_returns_the_usage_guide(server: StdioServer) -> None:
    server.initialize()
    result = server.request("prompts/get", {"name": "query"})["result"]
    message = result["messages"][0]
    assert message["role"] == "user"
    assert message["content"]["text"].startswith("# QMD - Quick Markdown Search")
    assert "### 2. vsearch (Semantic search)" in message["content"]["text"]
    error = server.request("prompts/get", {"name": "nope"})["error"]
    assert error["code"] == -32602


# -- tools ----------------------------------------------------------------------------------


def test_search_finds_the_authentication_page_with_numbered_snippet(server: StdioServer) -> None:
    server.initialize()
    result = server.call("search", {"query": "authentication", "limit": 3})
    items = result["structuredContent"]["results"]
    assert items, result
    top = items[0]
    assert top["file"] == "handbook/engineering/api/authentication.md"
    assert top["docid"].startswith("#") and len(top["docid"]) == 7
    assert 0 < top["score"] < 1
    assert "HTTP API reference" in top["context"]
    first_line = top["snippet"].split("\n")[0]
    assert first_line.split(": ", 1)[0].isdigit()
    assert text_of(result).startswith(f"Found {len(items)} result")


def test_search_collection_filter_and_no_results_text(server: StdioServer) -> None:
    server.initialize()
    archived = server.call("search", {"query": "roadmap", "collection": "archive"})
    files = [r["file"] for r in archived["structuredContent"]["results"]]
    assert files and all(f.startswith("archive/") for f in files)
    empty = server.call("search", {"query": "zzzqqqnonexistent"})
    assert text_of(empty) == 'No results found for "zzzqqqnonexistent"'
    assert empty["structuredContent"]["results"] == []


def test_search_rejects_bad_input_with_stable_codes(server: StdioServer) -> None:
    server.initialize()
    bad_type = server.call("search", {"query": 5})
    assert bad_type["isError"] is True
    assert bad_type["structuredContent"]["error"]["code"] == "invalid-argument"
    unknown = server.call("search", {"query": "x", "collection": "nope"})
    assert unknown["structuredContent"]["error"]["code"] == "not-found"
    hostile = server.call("search", {"query": 'C++ "unbalanced -x a:b NEAR(x y)'})
    assert "isError" not in hostile


def test_vsearch_without_vectors_is_an_error_result(server: StdioServer) -> None:
    server.initialize()
    result = server.call("vsearch", {"query": "how do clients log in"})
    assert result["isError"] is True
    assert text_of(result) == (
        "Vector index not found. Run 'qmd embed' first to create embeddings."
    )


def test_query_degrades_to_bm25_without_vectors(server: StdioServer) -> None:
    server.initialize()
    result = server.call("query", {"query": "rate limits", "limit": 5})
    files = [r["file"] for r in result["structuredContent"]["results"]]
    assert "handbook/engineering/api/rate limits.md" in files


def test_get_by_path_suffix_docid_and_line_suffix(server: StdioServer) -> None:
    server.initialize()
    whole = server.call("get", {"file": "engineering/api/authentication.md"})
    resource = whole["content"][0]["resource"]
    assert resource["uri"] == "qmd://handbook/engineering/api/authentication.md"
    assert resource["name"] == "handbook/engineering/api/authentication.md"
    assert resource["title"] == "Authentication"
    assert resource["text"].startswith("<!-- Context: ")
    assert "\n\n# Authentication" in resource["text"]  # line numbers are off by default
    docid = server.call("search", {"query": "authentication"})["structuredContent"]["results"][0][
        "docid"
    ]
    by_docid = server.call("get", {"file": docid})
    assert by_docid["content"][0]["resource"]["uri"] == resource["uri"]
    ranged = server.call(
        "get", {"file": "engineering/api/authentication.md:3", "lineNumbers": True}
    )
    body = ranged["content"][0]["resource"]["text"].split("-->\n\n", 1)[1]
    assert body.startswith("3: ")


def test_get_encodes_crazy_names_and_suggests_on_miss(server: StdioServer) -> None:
    server.initialize()
    result = server.call("get", {"file": "engineering/api/rate limits.md"})
    assert result["content"][0]["resource"]["uri"].endswith("rate%20limits.md")
    miss = server.call("get", {"file": "engineering/api/rate-limit.md"})
    assert miss["isError"] is True
    assert text_of(miss).startswith("Document not found: engineering/api/rate-limit.md")
    assert "Did you mean one of these?" in text_of(miss)
    assert miss["structuredContent"]["error"]["code"] == "not-found"


def test_multi_get_glob_list_skips_and_no_match(server: StdioServer) -> None:
    server.initialize()
    globbed = server.call("multi_get", {"pattern": "engineering/api/*.md"})
    uris = [c["resource"]["uri"] for c in globbed["content"] if c["type"] == "resource"]
    assert len(uris) == 3
    listed = server.call("multi_get", {"pattern": "handbook/README.md, nosuch.md"})
    assert listed["content"][0] == {"type": "text", "text": "Errors:\nFile not found: nosuch.md"}
    assert listed["content"][1]["resource"]["uri"] == "qmd://handbook/README.md"
    ambiguous = server.call("multi_get", {"pattern": "README.md, journal/2026-01.md"})
    assert ambiguous["content"][0]["text"] == (
        "Errors:\nAmbiguous path README.md: qmd://archive/README.md, qmd://handbook/README.md"
    )
    big = server.call("multi_get", {"pattern": "**/*.md", "maxBytes": 10240})
    skipped = [c["text"] for c in big["content"] if c["type"] == "text" and "SKIPPED" in c["text"]]
    assert skipped and "File too large" in skipped[0]
    none = server.call("multi_get", {"pattern": "nomatch/*.md"})
    assert none["isError"] is True


def test_multi_get_truncates_long_documents(server: StdioServer) -> None:
    server.initialize()
    result = server.call(
        "multi_get", {"pattern": "engineering/api/authentication.md", "maxLines": 2}
    )
    text = result["content"][0]["resource"]["text"]
    assert "[... truncated " in text and text.endswith("more lines]")


def test_status_reports_collections_and_counts(server: StdioServer) -> None:
    server.initialize()
    result = server.call("status", {})
    data = result["structuredContent"]
    assert data["hasVectorIndex"] is False
    names = [c["name"] for c in data["collections"]]
    assert set(names) == {"handbook", "archive"}
    assert data["totalDocuments"] == sum(c["documents"] for c in data["collections"])
    assert text_of(result).startswith("QMD Index Status:\n  Total documents: ")


# -- resource -----------------------------------------------------------------------------


def test_resource_read_found_encoded_and_not_found(server: StdioServer) -> None:
    server.initialize()
    raw = server.request("resources/read", {"uri": "qmd://handbook/engineering/api/rate limits.md"})
    encoded = server.request(
        "resources/read", {"uri": "qmd://handbook/engineering/api/rate%20limits.md"}
    )
    assert raw["result"]["contents"][0]["text"] == encoded["result"]["contents"][0]["text"]
    assert "\n\n1: # " in raw["result"]["contents"][0]["text"]
    missing = server.request("resources/read", {"uri": "qmd://handbook/nope.md"})
    envelope = json.loads(missing["result"]["contents"][0]["text"])
    assert envelope == {
        "success": False,
        "error": {"code": "not-found", "message": "Document not found: handbook/nope.md"},
    }
    # seed 001: a resource failure is data, a URI outside qmd:// too (REQ-SPEC-ERR-003)
    foreign = server.request("resources/read", {"uri": "file:///etc/hosts"})["result"]
    assert foreign["contents"][0]["mimeType"] == "application/json"
    assert json.loads(foreign["contents"][0]["text"]) == {
        "success": False,
        "error": {
            "code": "not-found",
            "message": "Resource not found: file:///etc/hosts (resources: qmd://{+path})",
        },
    }


# -- JSON-RPC rules (seed 001) --------------------------------------------------------------


def test_parse_error_invalid_request_and_unknown_method(server: StdioServer) -> None:
    server.send_raw(b"{not json\n")
    assert server.receive()["error"]["code"] == -32700
    server.send_raw(b"[1,2,3]\n")
    assert server.receive()["error"]["code"] == -32600
    server.send({"jsonrpc": "2.0", "id": 7, "params": {}})
    invalid = server.receive()
    assert invalid["error"]["code"] == -32600 and invalid["id"] == 7
    assert server.request("no/such/method")["error"] == {
        "code": -32601,
        "message": "Method not found",
    }


def test_blank_lines_and_notifications_get_no_reply(server: StdioServer) -> None:
    server.send_raw(b"\n   \n")
    server.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
    assert server.silent_for(0.5)
    assert server.request("ping")["result"] == {}


def test_oversized_line_is_rejected_and_the_server_keeps_serving(server: StdioServer) -> None:
    cap = 64 * 1024 * 1024
    chunk = b"x" * (1 << 20)
    for _ in range(cap // len(chunk) + 1):
        server.send_raw(chunk)
    reply = server.receive(timeout=30)
    assert reply["error"]["code"] == -32600
    assert reply["id"] is None
    server.send_raw(b"\n")
    assert server.request("ping")["result"] == {}


def test_unknown_tool_is_an_error_result(server: StdioServer) -> None:
    """Seed 001: tool failures are data, an unknown tool too (REQ-SPEC-ERR-002)."""
    server.initialize()
    result = server.request("tools/call", {"name": "nosuch", "arguments": {}})["result"]
    message = f"Tool nosuch not found (tools: {', '.join(tool_names(SPEC))})"
    assert result == {
        "content": [{"type": "text", "text": message}],
        "isError": True,
        "structuredContent": {
            "success": False,
            "error": {"code": "not-found", "message": message},
        },
    }


def test_stdin_eof_exits_cleanly(server: StdioServer) -> None:
    server.initialize()
    assert server.close() == 0
    assert server.elapsed_on_close < 5


# -- the 2026-07-28 era ---------------------------------------------------------------------


def test_modern_era_discover_and_envelope_rules(server: StdioServer) -> None:
    # An envelope error while the connection's era is still open decides nothing.
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 77,
            "method": "tools/list",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2030-01-01",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        }
    )
    unsupported = server.receive()
    assert unsupported["error"]["code"] == -32022
    assert unsupported["error"]["data"]["supported"] == ["2026-07-28"]
    discover = server.request("server/discover", modern=True)["result"]
    assert discover["supportedVersions"] == ["2026-07-28"]
    assert discover["resultType"] == "complete"
    assert discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "qmd"
    tools = server.request("tools/list", modern=True)["result"]
    assert tools["ttlMs"] == 60000 and tools["cacheScope"] == "private"
    result = server.call("search", {"query": "pagination"}, modern=True)
    assert result["structuredContent"]["results"][0]["file"].endswith("pagination.md")
    # That request pinned the connection to 2026-07-28, as the original's stdio entry does.
    plain = server.request("tools/list")["error"]
    assert plain["code"] == -32602 and "missing the required _meta envelope" in plain["message"]
    enveloped_initialize = server.request("initialize", {"protocolVersion": "2025-06-18"}, True)
    assert enveloped_initialize["error"]["code"] == -32601
    assert server.request("initialize", {"protocolVersion": "2025-06-18"})["error"] == {
        "code": -32022,
        "message": "Unsupported protocol version: 2025-06-18",
        "data": {"supported": ["2026-07-28"], "requested": "2025-06-18"},
    }


# -- compat surface smoke (the conformance suite checks it answer by answer) --------------------


def test_compat_surface_serves_the_original_tools(compat: StdioServer) -> None:
    reply = compat.initialize()
    assert reply["result"]["serverInfo"] == {"name": "qmd", "version": "2.8.3"}
    assert reply["result"]["instructions"].startswith("QMD is your local search engine over ")
    tools = compat.request("tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == tool_names(COMPAT)
    assert compat.request("prompts/list")["error"]["code"] == -32601
    result = compat.call(
        "query", {"searches": [{"type": "lex", "query": "pagination"}], "rerank": False}
    )
    top = result["structuredContent"]["results"][0]
    assert top["score"] == 1 and top["file"].endswith("pagination.md")
    compat.send_raw(b"{not json\n")
    assert compat.silent_for(0.5)  # the original drops malformed lines without a reply


# -- the official MCP client -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_official_mcp_client_lists_and_calls_tools(
    indexed: tuple[Path, dict[str, str]], mode: str
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "adapters.cli.main", "mcp"],
        env=indexed[1],
        cwd=str(REPO),
    )
    async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == tool_names(SPEC)
        result = await client.call_tool("search", {"query": "caching"})
        assert result.structured_content is not None
        files = [r["file"] for r in result.structured_content["results"]]
        assert "handbook/engineering/caching strategy.md" in files
        document = await client.read_resource("qmd://handbook/engineering/caching%20strategy.md")
        assert "Caching" in document.contents[0].text  # type: ignore[union-attr]
        prompt = await client.get_prompt("query")
        assert prompt.messages[0].role == "user"


SURFACE_ARGS = {SPEC: ["mcp"], COMPAT: ["mcp", "--compat", "2.8.3"]}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("surface", [SPEC, COMPAT])
async def test_official_client_calls_every_method_in_each_era(
    indexed: tuple[Path, dict[str, str]], surface: str, mode: str
) -> None:
    """Every MCP method each surface offers, through the official SDK client (`auto` speaks the
    2026-07-28 revision): no client-side validation error anywhere. Methods a surface does not
    offer come back as JSON-RPC errors, which the client raises as MCPError. Each tool is
    called with the example arguments declared beside it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "adapters.cli.main", *SURFACE_ARGS[surface]],
        env=indexed[1],
        cwd=str(REPO),
    )
    async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
        tools = (await client.list_tools()).tools
        examples = tool_examples(surface)
        assert [tool.name for tool in tools] == list(examples)
        for tool in tools:
            result = await client.call_tool(tool.name, examples[tool.name])
            assert result.content, tool.name
        assert (await client.list_resources()).resources == []
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["qmd://{+path}"]
        document = await client.read_resource("qmd://handbook/README.md")
        assert document.contents
        if surface == SPEC:
            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == ["query"]
            assert (await client.get_prompt("query")).messages
        else:
            with pytest.raises(MCPError):
                await client.list_prompts()
        if mode == "legacy":
            await client.send_ping()
