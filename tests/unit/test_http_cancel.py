"""`notifications/cancelled` over stateless HTTP: a POST of its own cancels the in-flight
request with that id from the same client (docs/spec/http.md, REQ-MCP-HTTP-007)."""

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


async def test_a_cancel_post_cancels_the_request_with_that_id(gate: threading.Event) -> None:
    calls: list[str] = []
    app = _app(gate, calls)
    slow = asyncio.ensure_future(_request(app, "POST", "/mcp", _call("query", 7), ACCEPT))
    while "query" not in calls:
        await asyncio.sleep(0.01)
    other = await _request(app, "POST", "/mcp", _cancel(8), ACCEPT)  # no such request
    assert other is not None and other.status == 202
    assert not slow.done()
    cancel = await _request(app, "POST", "/mcp", _cancel(7), ACCEPT)
    assert cancel is not None and cancel.status == 202 and cancel.body == b""
    reply = await asyncio.wait_for(slow, 5)  # answered at once, the gate still shut
    assert _events(reply) == [
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}}
    ]
    gate.set()
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
