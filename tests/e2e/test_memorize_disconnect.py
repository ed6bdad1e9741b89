"""Finding 5 of issue 22, end to end (REQ-MCP-HTTP-007): a real `qmd mcp --http --surface
memorize` process with the real embedding model; raw 2025-era clients call `merge_knowledge`,
read the `sampling/createMessage` it sends on their event stream, and hang up without
answering. Their waits must end and free both model-lane threads at once: `ping` is answered,
and a third `merge_knowledge` gets its own sampling request. Before, two such clients held the
lane for the sampling timeout (300 s) and every later request, `ping` included, hung."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_memorize_e2e import memory_env
from tests.http_harness import ACCEPT_BOTH, HttpServer

pytestmark = pytest.mark.models

PAIRS = ("How do I install a Python package with pip?", "How can I install a Python package?")


def _post(port: int, message: dict[str, Any]) -> socket.socket:
    body = json.dumps(message).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: {ACCEPT_BOTH}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(head + body)
    return sock


def _first_event(sock: socket.socket) -> dict[str, Any]:
    """Read the stream until its first `data:` line (the server's sampling request)."""
    seen = b""
    while b"\ndata: " not in seen or not seen.split(b"\ndata: ", 1)[1].count(b"\n"):
        chunk = sock.recv(65536)
        assert chunk, f"the stream ended: {seen!r}"
        seen += chunk
    line = seen.split(b"\ndata: ", 1)[1].split(b"\n", 1)[0]
    event: dict[str, Any] = json.loads(line)
    return event


def _call(name: str, arguments: dict[str, Any], request_id: int) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def test_clients_that_hang_up_on_merge_free_the_lane(tmp_path: Path) -> None:
    server = HttpServer(
        ["mcp", "--http", "--port", "0", "--surface", "memorize"], memory_env(tmp_path)
    ).start()
    try:
        for n, question in enumerate(PAIRS):
            arguments = {"question": question, "answer": "pip install NAME", "topic": "pip"}
            stored = server.mcp(_call("store_qa", arguments, n))
            assert stored.status == 200 and "result" in stored.events()[0], stored.text
        merge = _call("merge_knowledge", {"topic": "pip"}, 10)
        for attempt in range(2):  # as many as the model lane has threads
            sock = _post(server.port, {**merge, "id": 10 + attempt})
            asked = _first_event(sock)
            assert asked["method"] == "sampling/createMessage"
            sock.close()  # hang up without answering
        began = time.monotonic()
        pong = server.mcp({"jsonrpc": "2.0", "id": 20, "method": "ping"})
        assert pong.status == 200 and pong.events()[0]["result"] == {}
        sock = _post(server.port, {**merge, "id": 30})
        try:
            assert _first_event(sock)["method"] == "sampling/createMessage"
        finally:
            sock.close()
        assert time.monotonic() - began < 20  # not the 300 s sampling timeout
    finally:
        assert server.stop() == 0
