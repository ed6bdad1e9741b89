"""The legacy HTTP+SSE transport in the guarantee matrix, generated from the surface registry
(REQ-MCP-SSE-003, REQ-MCP-SSE-004): for every registered surface with a model tool, the ASGI
app driven in process over fakes whose model blocks until the test lets it go. A session's
model calls take the bounded lane (a full lane answers busy on the stream), a
`notifications/cancelled` POSTed to the session frees a queued call's place, closing the
stream cancels the session's calls, and a tool that waits on the client (sampling) sends its
request on the stream and takes the answer from the session's POSTs only."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from adapters.http.app import HttpSettings, OriginPolicy, QmdHttpApp
from adapters.http.legacy_sse import LegacySseTransport
from adapters.mcp.dispatch import BUSY
from adapters.mcp.registry import create_surface, surface_facts
from adapters.mcp.workers import WorkerPools
from domain.profiles import SEED_000
from tests.guarantees import HOST, Rig, model_calls, served_surfaces

SURFACES = [
    name
    for name in served_surfaces()
    if any(facts.runs_model for facts in surface_facts(name).tools.values())
]
WAIT_S = 5.0


def _app(rig: Rig, pools: WorkerPools) -> QmdHttpApp:
    settings = HttpSettings(
        policy=OriginPolicy.build("localhost", {}),
        profile=SEED_000,
        strict_original=False,
        timeout_s=30.0,
    )
    legacy = LegacySseTransport(
        pools, lambda: create_surface(rig.surface_name, rig.services, rig.context), 30.0
    )
    return QmdHttpApp(pools, settings, rig.outgoing, rig.facts, legacy)


@dataclass
class Stream:
    """One `GET /sse` in flight, driven in process."""

    app: QmdHttpApp
    hang_up: asyncio.Event = field(default_factory=asyncio.Event)
    reading: asyncio.Event = field(default_factory=asyncio.Event)  # clear: the client stalls
    events: asyncio.Queue[tuple[str, str]] = field(default_factory=asyncio.Queue)
    endpoint: str = ""
    task: asyncio.Future[None] | None = None
    next_id: int = 0

    async def open(self) -> Stream:
        self.reading.set()
        pending = [{"type": "http.request", "body": b"", "more_body": False}]

        async def receive() -> dict[str, Any]:
            if pending:
                return pending.pop(0)
            await self.hang_up.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] != "http.response.body":
                assert message["status"] == 200
                return
            await self.reading.wait()
            for block in message.get("body", b"").decode().split("\n\n"):
                lines = block.split("\n")
                if lines[0].startswith("event: ") and lines[1].startswith("data: "):
                    self.events.put_nowait((lines[0][7:], lines[1][6:]))

        scope = {"type": "http", "method": "GET", "path": "/sse", "headers": [HOST]}
        self.task = asyncio.ensure_future(self.app(scope, receive, send))
        kind, self.endpoint = await asyncio.wait_for(self.events.get(), WAIT_S)
        assert kind == "endpoint"
        return self

    async def post(self, message: dict[str, Any]) -> int:
        path, _, query = self.endpoint.partition("?")
        body = json.dumps(message).encode()
        sent: list[dict[str, Any]] = []
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            return pending.pop(0) if pending else {"type": "http.disconnect"}

        async def send(reply: dict[str, Any]) -> None:
            sent.append(reply)

        scope = {
            "type": "http",
            "method": "POST",
            "path": path,
            "query_string": query.encode(),
            "headers": [HOST, (b"content-type", b"application/json")],
        }
        await self.app(scope, receive, send)
        status: int = sent[0]["status"]
        return status

    async def receive(self, timeout: float = WAIT_S) -> dict[str, Any]:
        kind, data = await asyncio.wait_for(self.events.get(), timeout)
        assert kind == "message"
        message: dict[str, Any] = json.loads(data)
        return message

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": f"r{self.next_id}", "method": method, "params": params}
        assert await self.post(message) == 202
        return await self.receive()

    async def call(self, request_id: str, tool: str, arguments: dict[str, Any]) -> None:
        params = {"name": tool, "arguments": arguments}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        assert await self.post(message) == 202

    async def close(self) -> None:
        self.hang_up.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, WAIT_S)


async def _wait_reached(rig: Rig) -> None:
    assert await asyncio.get_running_loop().run_in_executor(None, rig.gate.reached)


async def _initialized(app: QmdHttpApp) -> Stream:
    stream = await Stream(app).open()
    params = {"protocolVersion": "2024-11-05", "capabilities": {"sampling": {}}}
    assert "result" in await stream.request("initialize", params)
    return stream


@pytest.mark.parametrize("surface", SURFACES)
async def test_a_closed_stream_and_a_cancel_free_the_lane(surface: str) -> None:
    rig = Rig(surface)
    tool, arguments = model_calls(rig)[0]
    pools = rig.pools(model_threads=1, model_queue=1)
    app = _app(rig, pools)
    try:
        leaving, staying = await _initialized(app), await _initialized(app)
        await leaving.call("a", tool, arguments)  # runs, held in its model
        await _wait_reached(rig)
        await staying.call("b", tool, arguments)  # waits in the queue
        await staying.call("c", tool, arguments)  # the lane is full
        busy = await staying.receive()
        assert busy["id"] == "c" and busy["error"]["code"] == BUSY
        cancel = {"requestId": "b", "reason": "test"}
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
        assert await staying.post(notice) == 202  # "b" leaves the queue: its place is free
        await staying.call("d", tool, arguments)
        assert (await staying.request("ping", {}))["result"] == {}  # "d" was not refused
        await leaving.close()  # cancels "a"; its model call still runs to its end
        rig.gate.open.set()
        done = await staying.receive(10)
        assert done["id"] == "d" and "result" in done
        with pytest.raises(TimeoutError):  # the cancelled "b" is never answered
            await staying.receive(0.2)
        await staying.close()
        assert app.legacy is not None and app.legacy.open_sessions == 0
    finally:
        rig.gate.open.set()
        pools.shutdown()


def _waiting_tools() -> list[tuple[str, str]]:
    return [
        (surface, tool)
        for surface in SURFACES
        for tool, facts in surface_facts(surface).tools.items()
        if facts.waits_on_client
    ]


def _prepare(rig: Rig, surface: str, tool: str) -> dict[str, Any]:
    """What makes the tool ask the client something: a scenario per waiting tool."""
    if (surface, tool) == ("memorize", "merge_knowledge"):
        rig.gate.open.set()
        for question in ("how to install pip packages", "how to install pip packages now"):
            rig.memory.store_qa(question, "pip install NAME", "pip")
        return {"topic": "pip"}
    raise AssertionError(f"no scenario for {surface} {tool}: add one to _prepare")


async def _ask_when_free(stream: Stream, tool: str, arguments: Any) -> dict[str, Any]:
    """The first message the call brings once the lane has room (within 2 s: the cancelled
    call before it needs a moment to leave its thread; waiting on the client, 300 s)."""
    for attempt in range(100):
        await stream.call(f"again-{attempt}", tool, arguments)
        message = await stream.receive()
        if message.get("error", {}).get("code") != BUSY:
            return {**message, "call": f"again-{attempt}"}
        await asyncio.sleep(0.02)
    raise AssertionError("the model lane never freed up")


@pytest.mark.parametrize(("surface", "tool"), _waiting_tools())
async def test_a_wait_on_the_client_goes_out_on_the_stream_and_ends_with_it(
    surface: str, tool: str
) -> None:
    rig = Rig(surface)
    arguments = _prepare(rig, surface, tool)
    pools = rig.pools(model_threads=1, model_queue=0)
    app = _app(rig, pools)
    try:
        asking, other = await _initialized(app), await _initialized(app)
        await asking.call("w", tool, arguments)
        asked = await asking.receive()
        assert asked["method"] == "sampling/createMessage"
        answer = {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}
        # another session cannot answer it: the answer is dropped, the wait goes on
        assert await other.post({"jsonrpc": "2.0", "id": asked["id"], "result": answer}) == 202
        with pytest.raises(TimeoutError):
            await asking.receive(0.3)
        await asking.close()  # the wait ends: the lane's only thread is free again
        again = await _ask_when_free(other, tool, arguments)
        assert again["method"] == "sampling/createMessage"
        reply = {"jsonrpc": "2.0", "id": again["id"], "result": answer}
        assert await other.post(reply) == 202
        done = await other.receive(10)
        while "method" in done:  # a notification the tool sent on the way
            done = await other.receive(10)
        assert done["id"] == again["call"] and "result" in done
        await other.close()
    finally:
        rig.gate.open.set()
        pools.shutdown()


@pytest.mark.parametrize(("surface", "tool"), _waiting_tools())
async def test_waits_on_the_client_leave_the_lane_to_other_model_calls(
    surface: str, tool: str
) -> None:
    """REQ-MCP-LANE-001 on legacy SSE: two calls left waiting on the client, a lane of one
    slot, and every other model tool of the surface still answers at once."""
    rig = Rig(surface)
    arguments = _prepare(rig, surface, tool)
    pools = rig.pools(model_threads=1, model_queue=2)
    app = _app(rig, pools)
    session = await _initialized(app)
    try:
        for waiting in ("w1", "w2"):
            await session.call(waiting, tool, arguments)
            assert (await session.receive())["method"] == "sampling/createMessage"
        others = [(t, a) for t, a in model_calls(rig) if not rig.facts.tool(t).waits_on_client]
        assert others
        for name, call in others:
            await session.call(name, name, call)
            reply = await session.receive(WAIT_S)
            assert reply.get("id") == name and "result" in reply, reply
    finally:
        await session.close()  # its waits end with the stream
        pools.shutdown()


async def test_a_session_that_does_not_read_its_stream_is_refused_busy() -> None:
    """REQ-MCP-SSE-003: requests in flight plus replies waiting for the stream are bounded
    per session; beyond, a POST is 503 and nothing is lost of what was accepted."""
    from adapters.http.legacy_sse import MAX_PENDING

    rig = Rig(SURFACES[0])
    pools = rig.pools()
    app = _app(rig, pools)
    try:
        stream = await _initialized(app)
        stream.reading.clear()  # the client stops reading
        statuses = []
        assert app.legacy is not None
        entry = app.legacy.session_for(stream.endpoint.partition("?")[2], {})
        assert entry is not None
        for n in range(MAX_PENDING + 40):
            ping = {"jsonrpc": "2.0", "id": n, "method": "ping"}
            statuses.append(await stream.post(ping))
            # a reply counts as unsent a moment before its request stops counting as in
            # flight (the safe side); let each ping settle so the bound is met exactly
            assert await asyncio.to_thread(entry.dispatcher.wait_idle, WAIT_S)
        accepted = statuses.count(202)
        assert set(statuses) == {202, 503} and accepted == MAX_PENDING
        stream.reading.set()
        answered = {(await stream.receive())["id"] for _ in range(accepted)}
        assert answered == set(range(accepted))
        await stream.close()
    finally:
        pools.shutdown()
