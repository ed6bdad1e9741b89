"""Issue 33 finding 5, end to end (REQ-MCP-LANE-001): a real `qmd mcp --surface memorize`
process with the real embedding model. Two 2025-era `merge_knowledge` calls are left waiting:
the server's `sampling/createMessage` requests are read and never answered, and the clients
stay connected. `query_qa` and `store_qa` must still be answered at once. Before, the two waits
held both model-lane slots for the sampling time limit (300 s): `ping` answered, and every
memory tool timed out (-32001 after the 30 s request limit). Over stdio and HTTP."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_memorize_disconnect import _call, _first_event, _post
from tests.e2e.test_memorize_e2e import memory_env
from tests.http_harness import HttpServer
from tests.mcp_harness import StdioServer

pytestmark = pytest.mark.models

PROMPT_S = 15.0  # the model is loaded before: an answer takes well under a second
# the first two are one group to merge (as tests/e2e/test_memorize_disconnect.py stores them)
QUESTIONS = (
    "How do I install a Python package with pip?",
    "How can I install a Python package?",
    "What does a wheel file hold?",
)


def _store(n: int) -> dict[str, Any]:
    return {"question": QUESTIONS[n], "answer": "pip install NAME", "topic": "pip"}


def _answered_at_once(reply: dict[str, Any], began: float) -> None:
    assert "result" in reply and reply["result"].get("isError") is not True, reply
    assert time.monotonic() - began < PROMPT_S


def test_stdio_merges_left_unanswered_do_not_hold_the_memory_tools(tmp_path: Path) -> None:
    server = StdioServer(memory_env(tmp_path), "--surface", "memorize")
    try:
        server.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"sampling": {}},
                "clientInfo": {"name": "e2e", "version": "1"},
            },
        )
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for n in range(2):  # the first loads the embedding model
            stored = server.call("store_qa", _store(n), timeout=120)
            assert stored.get("isError") is not True, stored
        for request_id in (1, 2):  # as many as the model lane has slots
            server.send(_call("merge_knowledge", {"topic": "pip"}, request_id))
            asked = server.receive(timeout=60)
            assert asked.get("method") == "sampling/createMessage", asked
        began = time.monotonic()
        server.send(_call("query_qa", {"question": QUESTIONS[0], "context": "pip"}, 3))
        _answered_at_once(server.receive(timeout=PROMPT_S + 30), began)
        began = time.monotonic()
        server.send(_call("store_qa", _store(2), 4))
        _answered_at_once(server.receive(timeout=PROMPT_S + 30), began)
    finally:
        server.kill()


def test_http_merges_left_unanswered_do_not_hold_the_memory_tools(tmp_path: Path) -> None:
    server = HttpServer(
        ["mcp", "--http", "--port", "0", "--surface", "memorize"], memory_env(tmp_path)
    ).start()
    waiting: list[socket.socket] = []
    try:
        for n in range(2):
            stored = server.mcp(_call("store_qa", _store(n), n))
            assert stored.status == 200 and "result" in stored.events()[0], stored.text
        for request_id in (10, 11):  # connected, never answering
            sock = _post(server.port, _call("merge_knowledge", {"topic": "pip"}, request_id))
            waiting.append(sock)
            assert _first_event(sock)["method"] == "sampling/createMessage"
        for request_id, (tool, arguments) in enumerate(
            (("query_qa", {"question": QUESTIONS[0], "context": "pip"}), ("store_qa", _store(2))),
            start=20,
        ):
            began = time.monotonic()
            reply = server.mcp(_call(tool, arguments, request_id))
            assert reply.status == 200, reply.text
            _answered_at_once(reply.events()[0], began)
    finally:
        for sock in waiting:
            sock.close()
        assert server.stop() == 0
