"""Seed 004's memory over the legacy HTTP+SSE transport (REQ-MCP-SSE-004, REQ-MCP-SSE-005):
a real `qmd mcp --http --surface memorize` process with the real embedding model.

The official `mcp` client (`sse_client`) runs the whole loop, its sampling callback answering
the server's `sampling/createMessage` that arrives on the stream (the answer goes back by
`POST /messages`), and hears `notifications/resources/updated` for the `knowledge://` URI it
subscribed to; a second session subscribed to the same URI hears it too, one subscribed to
another topic does not. A client that closes its stream while `merge_knowledge` waits on it
frees the model lane at once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.session import IncomingMessage
from mcp.client.sse import sse_client

from tests.e2e.test_memorize_e2e import (
    FUSED,
    PAIRS,
    TOPIC,
    Sampler,
    check_files,
    check_state,
    first_run,
    memory_env,
)
from tests.http_harness import HttpServer
from tests.sse_harness import SseSession

pytestmark = pytest.mark.models

WATCHED = "knowledge://Python%20packaging/pip"
OTHER = "knowledge://cooking%20eggs/x"


def memorize_server(env: dict[str, str]) -> HttpServer:
    return HttpServer(["mcp", "--http", "--port", "0", "--surface", "memorize"], env).start()


# the SDK warns that resources/subscribe is gone from 2026-07-28; this is a 2024-11-05 session
@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_the_memory_loop_and_its_subscriptions_over_the_official_sse_client(
    tmp_path: Path,
) -> None:
    env = memory_env(tmp_path)
    server = memorize_server(env)
    heard: list[str] = []

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(message.params.uri)

    sampler = Sampler()
    url = f"http://localhost:{server.port}/sse"
    other = SseSession(server.port)
    neighbour = SseSession(server.port)
    try:
        for session, uri in ((other, WATCHED), (neighbour, OTHER)):
            session.initialize()
            assert session.request("resources/subscribe", {"uri": uri})["result"] == {}
        async with Client(
            sse_client(url), mode="legacy", sampling_callback=sampler, message_handler=on_message
        ) as client:
            capabilities = client.server_capabilities
            assert capabilities.resources is not None and capabilities.resources.subscribe
            await client.subscribe_resource(WATCHED)
            await client.subscribe_resource(OTHER)
            await client.unsubscribe_resource(OTHER)
            ids = await first_run(client, sampler)  # the sampling round trip, over the stream
            await check_state(client, ids)
            for _ in range(50):
                if heard:
                    break
                await asyncio.sleep(0.1)
        assert heard == [WATCHED]
        told = other.receive(timeout=10)
        assert told == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": WATCHED},
        }
        assert neighbour.silent_for(0.5)
    finally:
        other.close()
        neighbour.close()
        assert server.stop() == 0
    check_files(tmp_path, ids)


def test_closing_the_stream_cancels_a_merge_that_waits_on_the_client(tmp_path: Path) -> None:
    """REQ-MCP-SSE-004: as many clients as the model lane has threads start a merge, read the
    sampling request on their stream and close it without answering: their waits end at once,
    `ping` is answered, and another client's merge gets its own sampling request."""
    server = memorize_server(memory_env(tmp_path))
    try:
        writer = SseSession(server.port)
        writer.initialize({"sampling": {}})
        for question, answer, topic in PAIRS[:2]:
            stored = writer.call(
                "store_qa", {"question": question, "answer": answer, "topic": topic}, 120
            )
            assert stored["result"]["structuredContent"]["created"] is True
        writer.close()
        merge = {"name": "merge_knowledge", "arguments": {"topic": TOPIC}}
        for attempt in range(2):
            leaver = SseSession(server.port)
            leaver.initialize({"sampling": {}})
            leaver.send(
                {"jsonrpc": "2.0", "id": f"m{attempt}", "method": "tools/call", "params": merge}
            )
            asked = leaver.receive(timeout=120)
            assert asked["method"] == "sampling/createMessage"
            leaver.close()  # hang up without answering
        began = time.monotonic()
        last = SseSession(server.port)
        try:
            last.initialize({"sampling": {}})
            assert last.request("ping", timeout=20)["result"] == {}
            last.send({"jsonrpc": "2.0", "id": "m", "method": "tools/call", "params": merge})
            asked = last.receive(timeout=30)
            assert asked["method"] == "sampling/createMessage"
            assert time.monotonic() - began < 20  # not the 300 s sampling timeout
            answer = {"role": "assistant", "content": {"type": "text", "text": FUSED}, "model": "m"}
            last.send({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
            merged = last.receive(timeout=60)
            assert merged["id"] == "m"
            assert len(merged["result"]["structuredContent"]["merged"]) == 1
        finally:
            last.close()
    finally:
        assert server.stop() == 0
