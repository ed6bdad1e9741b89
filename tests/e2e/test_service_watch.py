"""`--watch` keeps a serving index fresh: a file written, changed or removed under a
collection is found (or gone) by `search` within seconds, over HTTP and over stdio; files
outside the collection's mask are left alone. Polled with a deadline, never a fixed sleep."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.http_harness import HttpServer
from tests.mcp_harness import StdioServer, build_fixture_index

DEADLINE_S = 20.0


def _eventually(found: Callable[[], bool], what: str) -> float:
    began = time.monotonic()
    while time.monotonic() - began < DEADLINE_S:
        if found():
            return time.monotonic() - began
        time.sleep(0.1)
    raise AssertionError(f"{what} not seen within {DEADLINE_S} s")


def _http_search(server: HttpServer, word: str) -> list[str]:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": word}},
    }
    reply = server.mcp(message)
    result: dict[str, Any] = reply.events()[0]["result"]
    return [item["file"] for item in result.get("structuredContent", {}).get("results", [])]


@pytest.mark.parametrize(
    "command",
    [["mcp", "--http", "--watch"], ["server", "--transport", "http", "--watch"]],
    ids=["mcp-http", "server"],
)
def test_http_watch_indexes_new_changed_and_removed_files(
    tmp_path: Path, command: list[str]
) -> None:
    corpora, env = build_fixture_index(tmp_path)
    notes = corpora / "handbook" / "notes"
    server = HttpServer([*command, "--port", "0"], env).start()
    try:
        fresh = notes / "watched-arrival.md"
        fresh.write_text("# Arrival\n\nThe quokkaberry lands while the server runs.\n")
        took = _eventually(
            lambda: any("watched-arrival" in f for f in _http_search(server, "quokkaberry")),
            "a new file",
        )
        assert took < DEADLINE_S
        fresh.write_text("# Arrival\n\nNow it speaks of the zanzibarite instead.\n")
        _eventually(lambda: bool(_http_search(server, "zanzibarite")), "a changed file")
        assert _http_search(server, "quokkaberry") == []
        # outside the mask (**/*.md): not indexed
        (notes / "outside.txt").write_text("glimmerwort\n")
        fresh.unlink()
        _eventually(lambda: _http_search(server, "zanzibarite") == [], "a removed file")
        assert _http_search(server, "glimmerwort") == []
    finally:
        assert server.stop() == 0


def test_stdio_watch_indexes_a_new_file(tmp_path: Path) -> None:
    corpora, env = build_fixture_index(tmp_path)
    server = StdioServer(env, "--watch")
    try:
        server.initialize()
        (corpora / "handbook" / "stdio-arrival.md").write_text("# S\n\nplumbagoose\n")

        def found() -> bool:
            result = server.call("search", {"query": "plumbagoose"})
            return "stdio-arrival" in json.dumps(result)

        _eventually(found, "a new file over stdio")
    finally:
        assert server.close() == 0
