"""The HTTP limits part of the guarantee matrix (issue 22), generated from the surface
registry: for every registered surface and both HTTP eras (2025, 2026-07-28), a real server's
head, body and idle timeouts, its connection cap and its SIGTERM drain hold
(REQ-HTTP-LIMIT-001..005), and the legacy HTTP+SSE transport's too: open streams capped below
the connection cap, a POST's body timeout, a stream ended at SIGTERM (REQ-MCP-SSE-003). A
surface registered tomorrow is in this matrix by registering.

The limits sit below routing, so the backend (SQLite or PostgreSQL) cannot change them; the
matrix runs on SQLite.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_http_limits import (
    SLACK_S,
    connect,
    healthy,
    limited_env,
    read_until_closed,
)
from tests.http_harness import ACCEPT_BOTH, MODERN, HttpServer
from tests.mcp_harness import build_fixture_index
from tests.shipped import shipped_surfaces
from tests.sse_harness import SseSession, open_when_free

ERAS = ["2025", MODERN]
CAP = 6
LIMITS = {
    "header_timeout": "1",
    "body_timeout": "1.5",
    "idle_timeout": "1",
    "max_connections": str(CAP),
    "shutdown_grace": "3",
}


def tools_list(era: str) -> tuple[bytes, dict[str, str]]:
    """A `tools/list` request as that era sends it: body and headers."""
    if era == MODERN:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        message: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {"_meta": meta},
        }
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    else:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"Accept": ACCEPT_BOTH}
    headers["Content-Type"] = "application/json"
    return json.dumps(message).encode(), headers


def head(era: str, length: int) -> bytes:
    _body, headers = tools_list(era)
    lines = [f"{name}: {value}" for name, value in headers.items()]
    lines += ["Host: localhost", f"Content-Length: {length}"]
    return ("POST /mcp HTTP/1.1\r\n" + "\r\n".join(lines) + "\r\n\r\n").encode()


def answered(server: HttpServer, era: str) -> bool:
    body, headers = tools_list(era)
    reply = server.request("POST", "/mcp", body, headers)
    found = reply.json() if era == MODERN else reply.events()[0]
    return reply.status == 200 and bool(found["result"]["tools"])


@pytest.fixture(scope="module")
def index_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("matrix")
    _corpora, env = build_fixture_index(root)
    env.update(  # what the memorize and projmem surfaces read, kept under the test's folder
        QMD_MEMORY_DIR=str(root / "memory"),
        QMD_SESSIONS_DIR=str(root / "sessions"),
        QMD_SESSIONS_VAULT=str(root / "vault"),
    )
    return env


@pytest.fixture(scope="module", params=shipped_surfaces())
def server(index_env: dict[str, str], request: pytest.FixtureRequest) -> Iterator[HttpServer]:
    args = ["mcp", "--http", "--port", "0", "--surface", request.param]
    started = HttpServer(args, limited_env(index_env, **LIMITS)).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.parametrize("era", ERAS)
def test_head_body_and_idle_timeouts_hold(server: HttpServer, era: str) -> None:
    assert answered(server, era)
    outcomes: dict[str, tuple[bytes, float]] = {}

    def watch(name: str, sock: socket.socket) -> None:
        outcomes[name] = read_until_closed(sock)

    body, _headers = tools_list(era)
    silent = connect(server.port)
    partial_head = connect(server.port)
    partial_head.sendall(head(era, len(body))[:40])
    slow_body = connect(server.port)
    slow_body.sendall(head(era, len(body)) + body[:10])
    idle = connect(server.port)
    idle.sendall(head(era, len(body)) + body)
    watchers = [
        threading.Thread(target=watch, args=(name, sock))
        for name, sock in [
            ("silent", silent),
            ("head", partial_head),
            ("body", slow_body),
            ("idle", idle),
        ]
    ]
    for watcher in watchers:
        watcher.start()
    for watcher in watchers:
        watcher.join(10 + SLACK_S)
    assert outcomes["silent"][0] == b"" and outcomes["silent"][1] < 1 + SLACK_S
    assert outcomes["head"][0].startswith(b"HTTP/1.1 408 ") and outcomes["head"][1] < 1 + SLACK_S
    assert outcomes["body"][0].startswith(b"HTTP/1.1 408 ")
    assert b"the request body took too long" in outcomes["body"][0]
    assert outcomes["body"][1] < 1.5 + SLACK_S
    # the idle one was answered, then closed after the idle timeout
    assert outcomes["idle"][0].startswith(b"HTTP/1.1 200 ") and outcomes["idle"][1] < 1 + SLACK_S
    for sock in (silent, partial_head, slow_body, idle):
        sock.close()
    assert answered(server, era)


@pytest.mark.parametrize("era", ERAS)
def test_the_connection_cap_holds(server: HttpServer, era: str) -> None:
    body, _headers = tools_list(era)
    waiting = [connect(server.port) for _ in range(CAP)]  # idle: they make room
    time.sleep(0.3)
    assert answered(server, era)
    busy = []
    for _ in range(CAP):  # each in the middle of its request
        sock = connect(server.port)
        sock.sendall(head(era, len(body)) + body[:5])
        busy.append(sock)
    time.sleep(0.3)
    extra = connect(server.port)
    refused, waited = read_until_closed(extra)
    assert refused.startswith(b"HTTP/1.1 503 ") and waited < SLACK_S
    for sock in [*waiting, *busy]:
        sock.close()
    time.sleep(0.3)
    assert healthy(server.port) and answered(server, era)


def test_legacy_sse_streams_leave_room_and_posts_are_timed(server: HttpServer) -> None:
    """Open streams take at most half the connections; a POST to a session whose body never
    ends gets 408 at the body timeout; Streamable HTTP is answered throughout."""
    streams = [SseSession(server.port) for _ in range(CAP // 2)]
    try:
        assert [s.status for s in streams] == [200] * (CAP // 2)
        assert server.request("GET", "/sse").status == 503
        for era in ERAS:
            assert answered(server, era)
        streams[0].initialize()
        body = b'{"jsonrpc":"2.0","id":9,"method":"ping"}'
        slow = connect(server.port)
        slow.sendall(
            (
                f"POST {streams[0].endpoint} HTTP/1.1\r\nHost: localhost\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body[:10]
        )
        reply, waited = read_until_closed(slow)
        slow.close()
        assert reply.startswith(b"HTTP/1.1 408 ") and waited < 1.5 + SLACK_S
        assert streams[0].request("ping")["result"] == {}
        streams.pop().close()
        streams.append(open_when_free(server.port))  # the closed stream's slot is free
    finally:
        for stream in streams:
            stream.close()


@pytest.mark.parametrize("era", ERAS)
def test_a_large_head_in_one_write_gets_431(server: HttpServer, era: str) -> None:
    """REQ-HTTP-LIMIT-001 on the assembled head (issue 33 finding 8): a 60 KB header line
    in the same write as the rest of the request passed the 16 KiB cap."""
    body, _headers = tools_list(era)
    request = head(era, len(body)).replace(
        b"\r\n\r\n", b"\r\nX-Big: " + b"a" * 60_000 + b"\r\n\r\n"
    )
    sock = connect(server.port)
    sock.sendall(request + body)
    data, _ = read_until_closed(sock)
    sock.close()
    assert data.startswith(b"HTTP/1.1 431 "), data[:100]
    assert answered(server, era)


def test_sigterm_drains_within_the_grace_period(server: HttpServer) -> None:
    """Last for each surface: the server is stopped with requests half sent in both eras,
    and a legacy SSE stream open."""
    body, _headers = tools_list(MODERN)
    stream = open_when_free(server.port)  # the streams of the test before may still count
    stream.initialize()
    open_ones = []
    for era in ERAS:
        sock = connect(server.port)
        sock.sendall(head(era, len(body)) + body[:5])
        open_ones.append(sock)
    open_ones.append(connect(server.port))
    time.sleep(0.3)
    assert server.process is not None
    began = time.monotonic()
    os.kill(server.process.pid, signal.SIGTERM)
    assert server.process.wait(3 + SLACK_S + 5) == 0
    assert time.monotonic() - began < 3 + SLACK_S
    assert stream.ended(1)  # the server ended the stream; it did not wait for the client
    stream.close()
    for sock in open_ones:
        sock.close()
