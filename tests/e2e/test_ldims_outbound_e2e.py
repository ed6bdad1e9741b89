"""A real `qmd mcp --surface ldims` in front of a backend that drips its answers, named the
way a deployment names it (`LDIMS_API_BASE_URL` in the real environment; REQ-LDIMS-DEPLOY-006,
REQ-SPEC-STDIO-003): its workers come back at the deadline, so later searches are served, and
the end of its input ends the process promptly, whatever the backend does."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.backend_servers import (
    Behaviour,
    ScriptedPeer,
    drip_forever,
    json_answer,
    scripted_peer,
)
from tests.mcp_harness import StdioServer, fixture_env

TIMEOUT_S = 2
GOOD = {
    "results": [
        {
            "documentId": "ldims/a.md",
            "documentName": "a.md",
            "relevanceScore": 0.9,
            "matchedContext": "alpha",
            "metadata": {},
        }
    ],
    "totalMatches": 1,
    "searchMetadata": {},
}


class Backend:
    """Drips one byte a second until told to answer well."""

    def __init__(self) -> None:
        self.good = threading.Event()

    def __call__(self, _path: str) -> Behaviour:
        return json_answer(200, GOOD) if self.good.is_set() else drip_forever(every_s=1.0)


@pytest.fixture
def backend() -> Iterator[tuple[Backend, ScriptedPeer]]:
    script = Backend()
    with scripted_peer(script) as peer:
        yield script, peer


def _server(tmp_path: Path, peer: ScriptedPeer) -> StdioServer:
    env = fixture_env(tmp_path)  # an empty index of its own
    env["LDIMS_API_BASE_URL"] = f"{peer.url}/api"
    env["MCP_REQUEST_TIMEOUT_SECONDS"] = str(TIMEOUT_S)
    server = StdioServer(env, "--surface", "ldims")
    server.initialize()
    return server


def _search(server: StdioServer, request_id: int) -> None:
    server.send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "searchDocuments", "arguments": {"query": "alpha"}},
        }
    )


def _payload(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" in reply, reply  # the seed's answer, not the transport's -32001
    parsed: dict[str, Any] = json.loads(reply["result"]["content"][0]["text"])
    return parsed


def test_a_dripping_backend_gives_its_workers_back(
    backend: tuple[Backend, ScriptedPeer], tmp_path: Path
) -> None:
    """Two searches against a backend that drips (as many as the model lane has threads) are
    SEARCH_TIMEOUT at the deadline and let go of the backend; a third, once the backend
    answers, is served at once instead of waiting behind workers stuck in `recv`."""
    script, peer = backend
    server = _server(tmp_path, peer)
    try:
        started = time.monotonic()
        _search(server, 1)
        _search(server, 2)
        replies = {reply["id"]: reply for reply in (server.receive(15), server.receive(15))}
        elapsed = time.monotonic() - started
        for request_id in (1, 2):
            assert _payload(replies[request_id])["errorCode"] == "SEARCH_TIMEOUT"
        assert elapsed < TIMEOUT_S + 1, elapsed
        assert peer.wait_dripping(0, 2), "the service still holds the dripping connections"
        script.good.set()
        started = time.monotonic()
        _search(server, 3)
        third = server.receive(15)
        assert third["id"] == 3
        found = _payload(third)
        assert found["isError"] is False and found["totalMatches"] == 1
        assert time.monotonic() - started < 1.5
        assert server.close(timeout=15) == 0
    finally:
        server.kill()


def test_the_end_of_input_ends_the_service_while_the_backend_drips(
    backend: tuple[Backend, ScriptedPeer], tmp_path: Path
) -> None:
    """stdin closed right after a search: the search is answered (SEARCH_TIMEOUT at the
    deadline) and the process exits 0 soon after, though the backend never finishes."""
    _script, peer = backend
    server = _server(tmp_path, peer)
    try:
        _search(server, 1)
        assert peer.wait_dripping(1, 5)
        assert server.close(timeout=TIMEOUT_S + 12) == 0
        assert server.elapsed_on_close < TIMEOUT_S + 3, server.elapsed_on_close
        assert _payload(server.receive(1))["errorCode"] == "SEARCH_TIMEOUT"
    finally:
        server.kill()


def test_a_read_from_a_dripping_backend_is_the_seeds_server_error_in_time(
    backend: tuple[Backend, ScriptedPeer], tmp_path: Path
) -> None:
    """REQ-LDIMS-DEPLOY-006: `resources/read` has the transport's limit (not the tool's own
    budget); the exchange ends before it, so the answer is the seed's SERVER_ERROR body
    naming SEARCH_TIMEOUT, not the transport's -32001."""
    _script, peer = backend
    server = _server(tmp_path, peer)
    try:
        reply = server.request(
            "resources/read",
            {"uri": "ldims://docs/ldims%2Fa.md/extracted_content"},
            timeout=TIMEOUT_S + 5,
        )
        assert "result" in reply, reply
        body = json.loads(reply["result"]["contents"][0]["text"])
        assert body["errorCode"] == "SERVER_ERROR"
        assert body["errorDetails"]["backendErrorCode"] == "SEARCH_TIMEOUT"
        assert peer.wait_dripping(0, 2)
        assert server.close(timeout=15) == 0
    finally:
        server.kill()
