"""The legacy HTTP+SSE transport (MCP 2024-11-05: `GET /sse` + `POST /messages`), end to end
against real `qmd` server processes (REQ-MCP-SSE-001..006): the official `mcp` client's
`sse_client` on every registered surface, the wire seen raw, and the guarantees Streamable
HTTP gives (Origin/Host screen, bearer token, body limit, cancellation when the client goes,
SIGTERM). Whether `resources.subscribe` is declared is checked against whether it is served,
on every surface and every transport."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.sse import sse_client

from tests.http_harness import HttpServer
from tests.mcp_harness import StdioServer, build_fixture_index, initialize_request
from tests.shipped import shipped_surfaces
from tests.sse_harness import SseSession, open_when_free

SLACK_S = 3.0


@pytest.fixture(scope="module")
def index_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("sse")
    _corpora, env = build_fixture_index(root)
    env.update(  # what the memorize and projmem surfaces read, kept under the test's folder
        QMD_MEMORY_DIR=str(root / "memory"),
        QMD_SESSIONS_DIR=str(root / "sessions"),
        QMD_SESSIONS_VAULT=str(root / "vault"),
    )
    return env


@pytest.fixture(scope="module", params=shipped_surfaces())
def surface_server(
    index_env: dict[str, str], request: pytest.FixtureRequest
) -> Iterator[tuple[str, HttpServer]]:
    args = ["mcp", "--http", "--port", "0", "--surface", request.param]
    started = HttpServer(args, index_env).start()
    try:
        yield request.param, started
    finally:
        started.stop()


@pytest.fixture
def server(index_env: dict[str, str]) -> Iterator[HttpServer]:
    env = {**index_env, "QMD_HTTP_SHUTDOWN_GRACE": "3"}
    started = HttpServer(["mcp", "--http", "--port", "0", "--max-body-bytes", "4096"], env)
    started.start()
    try:
        yield started
    finally:
        started.stop()


def sse_url(server: HttpServer) -> str:
    return f"http://localhost:{server.port}/sse"


# -- every surface, the official client ----------------------------------------------------


async def test_the_official_sse_client_is_served_on_every_surface(
    surface_server: tuple[str, HttpServer],
) -> None:
    """REQ-MCP-SSE-001: the SDK's `sse_client` connects, shakes hands and lists the same
    tools Streamable HTTP lists."""
    _surface, server = surface_server
    over_mcp = server.mcp({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).events()[0]
    async with Client(sse_client(sse_url(server)), mode="legacy") as client:
        tools = await client.list_tools()
    names = [tool.name for tool in tools.tools]
    assert names and names == [tool["name"] for tool in over_mcp["result"]["tools"]]


def _subscribable_uri(templates: list[dict[str, Any]]) -> str:
    """A URI of the surface's first resource template, its variables filled in."""
    if not templates:
        return "qmd://notes/alpha.md"
    return re.sub(r"\{[^}]*\}", "x", str(templates[0]["uriTemplate"]))


def _declares_subscribe(capabilities: dict[str, Any]) -> bool:
    resources = capabilities.get("resources")
    return isinstance(resources, dict) and resources.get("subscribe") is True


def test_subscribe_is_declared_exactly_where_it_is_served(
    surface_server: tuple[str, HttpServer], index_env: dict[str, str]
) -> None:
    """REQ-MCP-SSE-006: on each transport and era, `resources.subscribe` is declared if and
    only if `resources/subscribe` answers `{}` there (before, memorize declared it over
    Streamable HTTP and in the 2026-07-28 era, and answered -32601)."""
    surface, server = surface_server
    outcomes: dict[str, tuple[bool, bool]] = {}

    stdio = StdioServer(index_env, "--surface", surface)
    try:
        shaken = stdio.initialize()["result"]
        templates = stdio.request("resources/templates/list").get("result", {})
        uri = _subscribable_uri(templates.get("resourceTemplates", []))
        answered = stdio.request("resources/subscribe", {"uri": uri})
        outcomes["stdio"] = (_declares_subscribe(shaken["capabilities"]), "result" in answered)
    finally:
        stdio.kill()

    initialize = initialize_request()
    shaken = server.mcp(initialize).events()[0]["result"]
    subscribe = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe"}
    answered = server.mcp({**subscribe, "params": {"uri": uri}}).events()[0]
    outcomes["http-2025"] = (_declares_subscribe(shaken["capabilities"]), "result" in answered)

    discovered = server.modern("server/discover", {}).json()["result"]
    modern = server.modern("resources/subscribe", {"uri": uri}, uri).json()
    outcomes["http-2026"] = (_declares_subscribe(discovered["capabilities"]), "result" in modern)

    session = SseSession(server.port)
    try:
        shaken = session.initialize()["result"]
        answered = session.request("resources/subscribe", {"uri": uri})
        outcomes["sse"] = (_declares_subscribe(shaken["capabilities"]), "result" in answered)
    finally:
        session.close()

    for transport, (declared, served) in outcomes.items():
        assert declared == served, f"{surface} over {transport}: declared {declared}"
    # where it is served at all, the legacy SSE session serves it like stdio
    assert outcomes["sse"] == outcomes["stdio"]
    assert not outcomes["http-2025"][0] and not outcomes["http-2026"][0]


# -- the default surface, raw ----------------------------------------------------------------


async def test_a_search_over_the_official_sse_client(server: HttpServer) -> None:
    async with Client(sse_client(sse_url(server)), mode="legacy") as client:
        found = await client.call_tool("search", {"query": "planning"})
    assert found.is_error is not True
    assert "planning" in str(found.structured_content or found.content).lower()


def test_the_endpoint_names_an_unguessable_session_of_its_own(server: HttpServer) -> None:
    """REQ-MCP-SSE-001, REQ-MCP-SSE-002: the first event names where to POST; each session
    has its own 256-bit id; replies go to the stream the session belongs to, never another."""
    first, second = SseSession(server.port), SseSession(server.port)
    try:
        ids = [s.endpoint.split("session_id=", 1)[1] for s in (first, second)]
        assert all(s.endpoint.startswith("/messages?session_id=") for s in (first, second))
        assert ids[0] != ids[1] and all(len(i) >= 43 for i in ids)
        first.initialize()
        reply = first.post({"jsonrpc": "2.0", "id": 7, "method": "ping"})
        assert reply.status == 202 and reply.text == "Accepted"
        assert first.receive() == {"result": {}, "jsonrpc": "2.0", "id": 7}
        assert second.silent_for(0.5)
        unknown = second.post(
            {"jsonrpc": "2.0", "id": 1, "method": "ping"}, path="/messages?session_id=nope"
        )
        assert unknown.status == 404 and unknown.json()["error"]["code"] == -32000
        # a session takes POSTs only with the credentials its stream was opened with
        holder = SseSession(server.port, {"Authorization": "Bearer mine"})
        try:
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            assert holder.post(ping, {"Authorization": "Bearer yours"}).status == 404
            assert holder.post(ping).status == 202
        finally:
            holder.close()
    finally:
        first.close()
        second.close()


def test_a_closed_stream_ends_its_session(server: HttpServer) -> None:
    session = SseSession(server.port)
    session.initialize()
    session.close()
    deadline = time.monotonic() + 10  # the server sees the stream go within moments
    while (late := session.post({"jsonrpc": "2.0", "id": 9, "method": "ping"})).status == 202:
        assert time.monotonic() < deadline, "the session outlived its stream"
        time.sleep(0.05)
    assert late.status == 404


def test_the_origin_screen_and_the_request_rules_hold(server: HttpServer) -> None:
    """REQ-MCP-SSE-003: the Origin/Host screen on both routes, the body limit, the methods,
    the media type and the wire's parse rules, as on /mcp."""
    evil = {"Origin": "http://evil.example"}
    refused = server.request("GET", "/sse", headers=evil)
    assert refused.status == 403 and refused.json()["error"]["code"] == -32003
    rebound = server.request("GET", "/sse", headers={"Host": "evil.example"})
    assert rebound.status == 403
    assert server.request("POST", "/sse", b"{}", {"Content-Type": "application/json"}).status == (
        405
    )
    session = SseSession(server.port)
    try:
        session.initialize()
        assert session.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, evil).status == 403
        assert server.request("GET", session.endpoint).status == 405
        big = {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"pad": "x" * 5000}}
        assert session.post(big).status == 413
        plain = session.post(
            b'{"jsonrpc":"2.0","id":4,"method":"ping"}', {"Content-Type": "text/plain"}
        )
        assert plain.status == 415
        broken = session.post(b'{"jsonrpc":')
        assert broken.status == 400 and broken.json()["error"]["code"] == -32700
        assert session.silent_for(0.3)  # none of them reached the session
        assert session.request("ping")["result"] == {}
    finally:
        session.close()


def test_a_bearer_token_guards_the_stream_and_its_posts(index_env: dict[str, str]) -> None:
    """REQ-MCP-SSE-003: with a token, both routes need it, and a session takes POSTs only
    with the credentials its stream was opened with."""
    server = HttpServer(["mcp", "--http", "--port", "0"], {**index_env, "QMD_HTTP_TOKEN": "s3"})
    server.start()
    try:
        assert server.request("GET", "/sse").status == 401
        auth = {"Authorization": "Bearer s3"}
        session = SseSession(server.port, auth)
        try:
            assert session.status == 200
            session.initialize()
            ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
            assert session.post(ping, {"Authorization": "Bearer nope"}).status == 401
            assert session.request("ping")["result"] == {}
        finally:
            session.close()
    finally:
        server.stop()


def test_sigterm_ends_open_streams_within_the_grace_period(server: HttpServer) -> None:
    """REQ-MCP-SSE-003: an open stream does not hold the server past its grace period; the
    server ends it and exits 0."""
    session = SseSession(server.port)
    session.initialize()
    assert server.process is not None
    began = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    assert session.ended(3 + SLACK_S)
    assert server.process.wait(3 + SLACK_S + 5) == 0
    assert time.monotonic() - began < 3 + SLACK_S
    session.close()


def test_streams_leave_room_for_other_requests(index_env: dict[str, str]) -> None:
    """REQ-MCP-SSE-003: open streams take at most half the connection cap; beyond, GET /sse is
    503 while Streamable HTTP is still answered, and a closed stream frees its slot."""
    env = {**index_env, "QMD_HTTP_MAX_CONNECTIONS": "6"}
    server = HttpServer(["mcp", "--http", "--port", "0"], env).start()
    sessions: list[SseSession] = []
    try:
        sessions = [SseSession(server.port) for _ in range(3)]
        assert [s.status for s in sessions] == [200, 200, 200]
        extra = server.request("GET", "/sse")
        assert extra.status == 503 and "too many open SSE sessions" in extra.text
        ping = server.mcp({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert ping.status == 200
        sessions.pop().close()
        sessions.append(open_when_free(server.port))  # the closed stream's slot is free
    finally:
        for session in sessions:
            session.close()
        server.stop()


def test_mcp_accept_rules_do_not_apply_to_the_legacy_routes(server: HttpServer) -> None:
    """The 2024-11-05 client sends no `Accept: application/json, text/event-stream` on its
    POSTs; the legacy route answers it all the same (Streamable HTTP would say 406)."""
    session = SseSession(server.port)
    try:
        session.initialize()
        reply = session.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, {"Accept": "*/*"})
        assert reply.status == 202
        assert session.receive()["id"] == 3
        streamable = server.request(
            "POST",
            "/mcp",
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"Content-Type": "application/json", "Accept": "*/*"},
        )
        assert streamable.status == 406  # /mcp keeps its own rule
    finally:
        session.close()


def test_a_batch_is_answered_on_the_stream(server: HttpServer) -> None:
    session = SseSession(server.port)
    try:
        session.initialize()
        batch = [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in (11, 12)]
        assert session.post(batch).status == 202
        assert {session.receive()["id"], session.receive()["id"]} == {11, 12}
    finally:
        session.close()
