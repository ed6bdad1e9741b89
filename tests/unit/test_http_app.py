"""The ASGI app with workers over fakes: a slow model call does not hold up fast requests,
time limits, a full model lane, disconnects, body limits."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from adapters.http.app import HttpSettings, OriginPolicy, QmdHttpApp
from adapters.http.exchange import HttpReply
from adapters.mcp.protocol import Session
from adapters.mcp.tools import ToolFacts, tool
from adapters.mcp.workers import Worker, WorkerPools
from domain.profiles import SEED_000
from tests.fakes import InMemoryStore, app_over
from tests.toy_surface import ToySurface

ACCEPT = [
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
]


class GatedSurface(ToySurface):
    """`query` (a model tool) waits for the gate; `get` answers at once."""

    def __init__(self, gate: threading.Event, calls: list[str]) -> None:
        super().__init__(app_over(InMemoryStore()).services())
        self.gate, self.calls = gate, calls

    @tool(
        "query",
        "Waits for the gate.",
        schema={"type": "object"},
        example={},
        facts=ToolFacts(runs_model=True),
    )
    def _query(self, _args: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("query")
        self.gate.wait(10)
        return {"content": [{"type": "text", "text": "slow"}]}

    @tool("get", "Answers at once.", schema={"type": "object"}, example={})
    def _get(self, _args: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("get")
        return {"content": [{"type": "text", "text": "fast"}]}


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def _app(
    gate: threading.Event, calls: list[str], timeout: float = 30.0, queue: int = 4
) -> QmdHttpApp:
    def worker() -> Worker:
        surface = GatedSurface(gate, calls)
        return Worker(Session(surface), surface._services, lambda: None, lambda: None)

    pools = WorkerPools(worker, threads=4, model_threads=1, model_queue=queue)
    settings = HttpSettings(
        policy=OriginPolicy.build("localhost", {}),
        profile=SEED_000,
        strict_original=False,
        timeout_s=timeout,
        max_body_bytes=1024,
    )
    return QmdHttpApp(pools, settings, facts=GatedSurface.facts)


async def _request(
    app: QmdHttpApp,
    method: str,
    path: str,
    body: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
    disconnect: asyncio.Event | None = None,
) -> HttpReply | None:
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        await (disconnect or asyncio.Event()).wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    # a client always names the server it speaks to (REQ-HTTP-PARSE-003)
    raw_headers = [(b"host", b"localhost:8181"), *(headers or [])]
    scope = {"type": "http", "method": method, "path": path, "headers": raw_headers}
    await app(scope, receive, send)
    if not sent:
        return None
    head = dict(sent[0]["headers"])
    content_type = head.get(b"content-type")
    return HttpReply(
        sent[0]["status"], sent[1]["body"], content_type.decode() if content_type else None
    )


def _call(tool: str, request_id: int = 1) -> bytes:
    params = {"name": tool, "arguments": {}}
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    ).encode()


def _events(reply: HttpReply | None) -> list[Any]:
    assert reply is not None
    chunks = reply.body.decode().split("\n\n")
    return [json.loads(c.split("data: ", 1)[1]) for c in chunks if c.startswith("event: message")]


async def test_a_slow_model_call_does_not_hold_up_fast_requests(gate: threading.Event) -> None:
    calls: list[str] = []
    app = _app(gate, calls)
    slow = asyncio.ensure_future(_request(app, "POST", "/mcp", _call("query"), ACCEPT))
    while "query" not in calls:
        await asyncio.sleep(0.01)
    began = time.perf_counter()
    fast = await asyncio.gather(
        *(_request(app, "POST", "/mcp", _call("get", i), ACCEPT) for i in range(20))
    )
    health = await _request(app, "GET", "/health")
    elapsed = time.perf_counter() - began
    assert not slow.done()
    assert all(_events(r)[0]["result"]["content"][0]["text"] == "fast" for r in fast)
    assert health is not None and health.status == 200
    assert elapsed < 5  # they never waited for the gate (it stays shut for 10 s)
    gate.set()
    assert _events(await slow)[0]["result"]["content"][0]["text"] == "slow"
    app.pools.shutdown()


async def test_a_request_past_its_time_limit_gets_a_timeout_error(gate: threading.Event) -> None:
    app = _app(gate, [], timeout=0.2)
    reply = await _request(app, "POST", "/mcp", _call("query", 7), ACCEPT)
    assert reply is not None and reply.status == 200
    assert _events(reply) == [
        {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {"code": -32001, "message": "Request timed out after 0.2 s"},
        }
    ]
    gate.set()
    app.pools.shutdown()


async def test_a_full_model_lane_answers_busy(gate: threading.Event) -> None:
    calls: list[str] = []
    app = _app(gate, calls, queue=0)
    first = asyncio.ensure_future(_request(app, "POST", "/mcp", _call("query"), ACCEPT))
    while "query" not in calls:
        await asyncio.sleep(0.01)
    busy = await _request(app, "POST", "/mcp", _call("query", 2), ACCEPT)
    assert busy is not None and busy.status == 503
    assert json.loads(busy.body)["error"]["message"].startswith("Server busy")
    gate.set()
    await first
    app.pools.shutdown()


async def test_a_queued_request_whose_client_left_never_runs(gate: threading.Event) -> None:
    calls: list[str] = []
    app = _app(gate, calls)
    first = asyncio.ensure_future(_request(app, "POST", "/mcp", _call("query"), ACCEPT))
    while "query" not in calls:
        await asyncio.sleep(0.01)
    gone = asyncio.Event()
    second = asyncio.ensure_future(
        _request(app, "POST", "/mcp", _call("query", 2), ACCEPT, disconnect=gone)
    )
    await asyncio.sleep(0.05)
    gone.set()
    assert await second is None  # nobody to answer
    gate.set()
    await first
    await asyncio.sleep(0.3)  # time for the lane to pick the queued job up, were it not cancelled
    app.pools.shutdown()
    assert calls == ["query"]


async def test_body_limit(gate: threading.Event) -> None:
    app = _app(gate, [])
    reply = await _request(app, "POST", "/mcp", b"x" * 2048, ACCEPT)
    assert reply is not None and reply.status == 413
    assert json.loads(reply.body)["error"]["message"] == (
        "Request body too large (limit 1024 bytes)"
    )
    app.pools.shutdown()


def test_the_worker_pools_have_one_home() -> None:
    # the HTTP transport imports them from adapters/mcp/workers.py; no re-export shim
    assert importlib.util.find_spec("adapters.http.workers") is None


async def test_every_route_in_the_table_sits_behind_the_origin_guard(
    gate: threading.Event,
) -> None:
    app = _app(gate, [])
    assert set(app._routes) >= {"/health", "/query", "/search", "/mcp"}
    hostile = [(b"origin", b"https://evil.example"), *ACCEPT]
    for path in app._routes:
        for method in ("GET", "POST"):
            reply = await _request(app, method, path, _call("get"), hostile)
            assert reply is not None and reply.status == 403, (method, path)
    unknown = await _request(app, "GET", "/nowhere")
    assert unknown is not None and unknown.status == 404
    app.pools.shutdown()
