"""Cancelling over stateless HTTP (docs/spec/http.md, REQ-MCP-HTTP-007, REQ-SEC-OUT-003): a
`notifications/cancelled` POSTed on its own cancels nothing; the requester cancels by closing
its connection."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest

from tests.unit.test_http_app import ACCEPT, _app, _call, _events, _request


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def _cancel(request_id: int) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the user stopped it"},
        }
    ).encode()


async def test_a_cancel_posted_by_anyone_else_cancels_nothing(gate: threading.Event) -> None:
    """REQ-SEC-OUT-003: over stateless HTTP nothing proves a POSTed cancel comes from the
    requester (every local client shares one address and may share one token), so only the
    requester's own connection can cancel its request, by closing."""
    calls: list[str] = []
    app = _app(gate, calls)
    slow = asyncio.ensure_future(_request(app, "POST", "/mcp", _call("query", 7), ACCEPT))
    while "query" not in calls:
        await asyncio.sleep(0.01)
    cancel = await _request(app, "POST", "/mcp", _cancel(7), ACCEPT)
    assert cancel is not None and cancel.status == 202 and cancel.body == b""
    await asyncio.sleep(0.1)
    assert not slow.done()
    gate.set()
    reply = await asyncio.wait_for(slow, 5)
    assert _events(reply)[0]["result"]["content"][0]["text"] == "slow"
    app.pools.shutdown()


async def test_closing_the_connection_cancels_and_frees_the_lane(gate: threading.Event) -> None:
    calls: list[str] = []
    app = _app(gate, calls, queue=0)  # one model thread, no queue
    gone = asyncio.Event()
    slow = asyncio.ensure_future(
        _request(app, "POST", "/mcp", _call("query", 7), ACCEPT, disconnect=gone)
    )
    while "query" not in calls:
        await asyncio.sleep(0.01)
    gone.set()
    assert await asyncio.wait_for(slow, 5) is None  # nobody left to answer
    gate.set()  # the handler sees its gate open and ends; the slot is free again
    reply = None
    for _ in range(100):
        reply = await _request(app, "POST", "/mcp", _call("query", 8), ACCEPT)
        if reply is not None and reply.status == 200:
            break
        await asyncio.sleep(0.02)
    assert reply is not None and reply.status == 200
    app.pools.shutdown()


async def test_an_ambiguous_id_cancels_nothing(gate: threading.Event) -> None:
    calls: list[str] = []
    app = _app(gate, calls)
    first = asyncio.ensure_future(_request(app, "POST", "/mcp", _call("query", 3), ACCEPT))
    second = asyncio.ensure_future(_request(app, "POST", "/mcp", _call("query", 3), ACCEPT))
    while "query" not in calls:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    await _request(app, "POST", "/mcp", _cancel(3), ACCEPT)
    await asyncio.sleep(0.1)
    assert not first.done() and not second.done()
    gate.set()
    for pending in (first, second):
        text = _events(await pending)[0]["result"]["content"][0]["text"]
        assert text == "slow"
    app.pools.shutdown()
