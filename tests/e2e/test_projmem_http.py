"""The projmem surface over HTTP: `qmd mcp --http --surface projmem` lists the nine tools and
serves a search, a chunk get and a session read (REQ-PROJMEM-SURFACE-001)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_projmem_stdio import projmem_env
from tests.guarantees import tool_names
from tests.http_harness import HttpServer


def test_projmem_over_http(tmp_path: Path) -> None:
    env = projmem_env(tmp_path)
    server = HttpServer(["mcp", "--http", "--surface", "projmem", "--port", "0"], env).start()
    try:
        listed = server.modern("tools/list", {})
        assert listed.status == 200
        assert [t["name"] for t in listed.json()["result"]["tools"]] == tool_names("projmem")
        found = server.modern(
            "tools/call",
            {"name": "projmem_search", "arguments": {"query": "refresh token"}},
            "projmem_search",
        ).json()["result"]
        hit = found["structuredContent"]["results"][0]
        assert hit["path"] == "notes/code-notes/auth.md" and hit["headingPath"].startswith("Auth")
        got = server.modern(
            "tools/call",
            {"name": "projmem_get", "arguments": {"identifier": f"#{hit['chunkId']}"}},
            "projmem_get",
        ).json()["result"]
        assert got["structuredContent"]["chunks"][0]["chunkId"] == hit["chunkId"]
        sessions = server.modern(
            "tools/call",
            {"name": "projmem_session_list", "arguments": {"limit": 1}},
            "projmem_session_list",
        ).json()["result"]
        assert sessions["structuredContent"]["count"] == 1
    finally:
        assert server.stop() == 0
