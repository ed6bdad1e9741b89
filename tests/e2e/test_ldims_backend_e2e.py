"""Seed 003's deployment, qmd to qmd over loopback (docs/spec/ldims.md REQ-LDIMS-DEPLOY-*):
a `qmd` HTTP service over an index serves the LDIMS backend API, and a separate
`qmd mcp --surface ldims` with no documents of its own and `LDIMS_API_BASE_URL` pointing at
it serves searchDocuments and extracted_content from it, driven by the official `mcp` client.
A backend that is down, answers errors or never answers is the seed's error object."""

from __future__ import annotations

import json
import socket
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from adapters.bootstrap import build_app
from tests.http_harness import HttpServer
from tests.mcp_harness import REPO, StdioServer, fixture_env

DOCS = {
    "sales/q4-strategy.md": "---\ndate: 2023-12-01T10:00:00Z\nauthor: John Doe\n"
    "documentType: Strategy Document\n---\n# Q4 2023 Sales Strategy\n\n"
    "The fourth quarter sales strategy focuses on renewals and key accounts.\n",
    "sales/q3-review.md": "---\ndate: 2023-09-15\nauthor: Jane Roe\n---\n# Q3 Review\n\n"
    "Third quarter sales review: renewals slipped, key accounts grew.\n",
    "notes 100%.txt": "plain notes about sales in a text file\n",
}
Q4 = "ldims/sales/q4-strategy.md"


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """The LDIMS backend: qmd's HTTP service over an index of the documents (default
    surface: the backend API does not depend on the MCP surface served beside it)."""
    root = tmp_path_factory.mktemp("backend")
    for name, text in DOCS.items():
        target = root / "docs" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    env = fixture_env(root)
    app = build_app(env=env, with_models=False)
    try:
        app.collections.add(str(root / "docs"), "ldims", "**/*.{md,txt}")
    finally:
        app.close()
    server = HttpServer(["mcp", "--http", "--port", "0"], env).start()
    yield server
    server.stop()


def _service_env(tmp_path: Path, base_url: str, **extra: str) -> dict[str, str]:
    """The MCP service's own environment: an empty index of its own, the backend's URL."""
    env = fixture_env(tmp_path)
    env["LDIMS_API_BASE_URL"] = base_url
    env.update(extra)
    return env


def _payload(result: Any) -> dict[str, Any]:
    assert len(result.content) == 1 and result.content[0].type == "text"
    parsed: dict[str, Any] = json.loads(result.content[0].text)
    return parsed


def _stdio(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "adapters.cli.main", "mcp", "--surface", "ldims"],
        env=env,
        cwd=str(REPO),
    )


def test_backend_api_answers_the_seeds_shapes(backend: HttpServer) -> None:
    """REQ-LDIMS-DEPLOY-001: search over extracted content and a file's extracted content."""
    found = backend.request("GET", "/api/documents?query=sales+strategy&maxResults=2")
    assert found.status == 200 and found.headers["content-type"] == "application/json"
    body = found.json()
    assert body["isError"] is False and body["results"][0]["documentId"] == Q4
    assert body["results"][0]["documentName"] == "q4-strategy.md"
    assert 0 < len(body["results"]) <= 2 and body["totalMatches"] >= len(body["results"])
    exact = backend.request("GET", "/api/documents?query=renewals&searchMode=exact").json()
    assert {r["documentId"] for r in exact["results"]} == {Q4, "ldims/sales/q3-review.md"}
    quoted = urllib.parse.quote(Q4, safe="")
    for path in (f"/api/document-files/{quoted}/content", f"/api/document-files/{quoted}"):
        content = backend.request("GET", path)
        assert content.status == 200
        fields = content.json()
        assert fields["processingStatus"] == "completed" and fields["id"] == Q4
        assert "renewals and key accounts" in fields["extractedContent"]
        assert fields["documentName"] == "q4-strategy.md" and fields["format"] == "md"
    odd = urllib.parse.quote("ldims/notes 100%.txt", safe="")
    assert backend.request("GET", f"/api/document-files/{odd}/content").status == 200
    missing = backend.request("GET", "/api/document-files/ldims%2Fnope.md/content")
    assert missing.status == 404 and missing.json() == {
        "isError": True,
        "errorCode": "RESOURCE_NOT_FOUND",
        "errorMessage": "Document or its content not found.",
    }
    refused = backend.request("GET", "/api/documents?query=sales&limit=3")
    assert refused.status == 400 and refused.json()["errorCode"] == "INVALID_INPUT"
    assert refused.json()["errorDetails"] == {"field": "limit", "issue": "unknown parameter"}
    empty = backend.request("GET", "/api/documents?query=+")
    assert empty.status == 400 and empty.json()["errorDetails"]["field"] == "query"
    assert backend.request("GET", "/api/other").status == 404
    assert backend.request("POST", "/api/documents?query=sales").status == 404


async def test_mcp_service_serves_from_the_backend(backend: HttpServer, tmp_path: Path) -> None:
    """REQ-LDIMS-DEPLOY-002: the service has no documents; everything comes from the backend,
    under the service's own hard limit."""
    base = f"http://127.0.0.1:{backend.port}/api"
    env = _service_env(tmp_path, base, SEARCH_MAX_RESULTS_HARD_LIMIT="1")
    async with Client(_stdio(env)) as client:
        found = _payload(
            await client.call_tool(
                "searchDocuments",
                {"query": "sales strategy", "maxResults": 3, "filters": {"submitter": "John Doe"}},
            )
        )
        assert found["isError"] is False
        [hit] = found["results"]
        assert hit["documentId"] == Q4 and hit["metadata"]["submitter"] == "John Doe"
        assert found["searchMetadata"]["maxResultsCappedAt"] == 1
        assert found["searchMetadata"]["executionTime"].endswith("s")
        uri = f"ldims://docs/{urllib.parse.quote(Q4, safe='')}/extracted_content"
        content = (await client.read_resource(uri)).contents[0]
        assert "renewals and key accounts" in content.text  # type: ignore[union-attr]
        assert (content.meta or {})["ldims/metadata"]["documentName"] == "q4-strategy.md"
        missing = await client.read_resource("ldims://docs/ldims%2Fnope.md/extracted_content")
        assert json.loads(missing.contents[0].text)["errorCode"] == "RESOURCE_NOT_FOUND"  # type: ignore[union-attr]
        empty = _payload(await client.call_tool("searchDocuments", {"query": "zebra giraffe"}))
        assert empty["isError"] is False and empty["results"] == []
        # the backend's refusal is passed on in the seed's terms
        bad = await client.call_tool(
            "searchDocuments", {"query": "sales", "filters": {"dateFrom": "yesterday"}}
        )
        assert bad.is_error is True and _payload(bad)["errorCode"] == "INVALID_INPUT"
        assert _payload(bad)["errorDetails"]["field"] == "filters.dateFrom"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_backend_that_is_down_is_backend_api_error(tmp_path: Path) -> None:
    """REQ-LDIMS-DEPLOY-003: nothing listens at the URL."""
    env = _service_env(tmp_path, f"http://127.0.0.1:{_closed_port()}/api")
    async with Client(_stdio(env)) as client:
        result = await client.call_tool("searchDocuments", {"query": "sales"})
        assert result.is_error is True
        assert _payload(result) == {
            "isError": True,
            "errorCode": "BACKEND_API_ERROR",
            "errorMessage": "The document search service encountered an internal error.",
            "errorDetails": {"reason": "the LDIMS backend cannot be reached"},
        }
        read = await client.read_resource("ldims://docs/ldims%2Fa.md/extracted_content")
        body = json.loads(read.contents[0].text)  # type: ignore[union-attr]
        assert body["errorCode"] == "SERVER_ERROR"
        assert body["errorDetails"]["backendErrorCode"] == "BACKEND_API_ERROR"


async def test_a_backend_answering_errors_is_backend_api_error(
    backend: HttpServer, tmp_path: Path
) -> None:
    """REQ-LDIMS-DEPLOY-003: a URL where no backend API is (the service's 404s)."""
    env = _service_env(tmp_path, f"http://127.0.0.1:{backend.port}/nothing-here")
    async with Client(_stdio(env)) as client:
        result = _payload(await client.call_tool("searchDocuments", {"query": "sales"}))
        assert result["errorCode"] == "BACKEND_API_ERROR"
        assert result["errorDetails"] == {"backend_status": 404}


def test_a_backend_that_never_answers_is_search_timeout(tmp_path: Path) -> None:
    """REQ-LDIMS-DEPLOY-003: a backend that accepts and says nothing, under a 1 s limit."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    port = silent.getsockname()[1]
    env = _service_env(tmp_path, f"http://127.0.0.1:{port}/api", MCP_REQUEST_TIMEOUT_SECONDS="1")
    server = StdioServer(env, "--surface", "ldims")
    try:
        server.initialize()
        result = server.call("searchDocuments", {"query": "sales"})
        assert result["isError"] is True
        assert json.loads(result["content"][0]["text"])["errorCode"] == "SEARCH_TIMEOUT"
    finally:
        server.kill()
        stop.set()
        for connection in held:
            connection.close()
        silent.close()


def test_a_url_that_is_not_http_is_refused_at_start(tmp_path: Path) -> None:
    """REQ-LDIMS-DEPLOY-002: a bad LDIMS_API_BASE_URL stops the service with a clear error."""
    import subprocess

    env = _service_env(tmp_path, "ftp://backend/api")
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", "mcp", "--surface", "ldims"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "LDIMS_API_BASE_URL must be an http:// or https:// URL" in done.stderr


def test_the_original_surfaces_server_has_no_backend_api(backend: HttpServer) -> None:
    """REQ-MCP-HTTP-004: under the original's rules every other path stays 404."""
    compat = HttpServer(["mcp", "--compat", "2.8.3", "--http", "--port", "0"], backend.env)
    compat.start()
    try:
        reply = compat.request("GET", "/api/documents?query=sales")
        assert reply.status == 404 and reply.text == "Not Found"
    finally:
        compat.stop()
