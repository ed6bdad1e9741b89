"""The disconnect/cancel part of the guarantee matrix, generated from the surface registry:
for every registered surface over stdio, HTTP in the 2025 era and HTTP in the 2026-07-28 era,
a long request that its client cancels (stdio) or hangs up on (HTTP) frees its place in the
model lane and the server keeps answering (REQ-MCP-HTTP-007, REQ-MCP-STDIO-004,
REQ-SEC-OUT-003). The model is a fake that blocks until the test lets it go; nothing here
waits longer than it must, so it runs in CI. A new surface is covered by registering it."""

from __future__ import annotations

import asyncio
import json
import queue
import time
from typing import Any

import pytest

from adapters.mcp.dispatch import BUSY
from adapters.mcp.registry import surface_facts
from tests.guarantees import (
    Exchange,
    Rig,
    Stdio,
    legacy_call,
    model_calls,
    modern_call,
    replies_of,
    served_surfaces,
)

# A surface that declares no model tool (the unit tests' toy surface) has no long call to
# cancel; every other registered surface is covered by registering it.
SURFACES = [
    name
    for name in served_surfaces()
    if any(facts.runs_model for facts in surface_facts(name).tools.values())
]


def _long_call(surface: str) -> tuple[Rig, str, dict[str, Any]]:
    rig = Rig(surface)
    calls = model_calls(rig)
    assert calls, f"{surface} declares a model tool but none could be called"
    tool, arguments = calls[0]
    return rig, tool, arguments


@pytest.mark.parametrize("surface", SURFACES)
def test_stdio_a_cancelled_request_frees_its_slot(surface: str) -> None:
    rig, tool, arguments = _long_call(surface)
    stdio = Stdio(rig, rig.pools(model_threads=1, model_queue=1))
    try:
        stdio.handshake()
        stdio.call("a", tool, arguments)  # runs, held in its model
        assert rig.gate.reached()
        stdio.call("b", tool, arguments)  # waits in the queue
        stdio.call("c", tool, arguments)  # the lane is full
        assert stdio.reply()["error"]["code"] == BUSY
        stdio.cancel("b")  # leaves the queue at once: its place is free
        stdio.call("d", tool, arguments)
        stdio.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
        assert stdio.reply()["id"] == "ping"  # and "d" was not refused busy before it
        stdio.cancel("a")
        rig.gate.open.set()
        done = stdio.reply()
        assert done["id"] == "d" and "result" in done
        stdio.send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
        assert stdio.reply()["id"] == "after"
        with pytest.raises(queue.Empty):  # the cancelled requests are never answered
            stdio.reply(timeout=0.2)
    finally:
        rig.gate.open.set()
        stdio.close()


def _http_call(era: str, method: str, params: dict[str, Any], request_id: Any) -> Any:
    return (modern_call if era == "modern" else legacy_call)(method, params, request_id)


async def _wait_reached(rig: Rig) -> None:
    assert await asyncio.get_running_loop().run_in_executor(None, rig.gate.reached)


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("surface", SURFACES)
async def test_http_a_client_that_hangs_up_frees_its_slot(surface: str, era: str) -> None:
    rig, tool, arguments = _long_call(surface)
    pools = rig.pools(model_threads=1, model_queue=1)
    app = rig.http(pools)
    params = {"name": tool, "arguments": arguments}

    def post(request_id: Any, method: str = "tools/call", body: Any = None) -> Exchange:
        data, headers = _http_call(era, method, params if body is None else body, request_id)
        return Exchange(app, data, headers)

    try:
        first, queued = post("a"), post("b")
        running = asyncio.ensure_future(first.run())
        await _wait_reached(rig)
        waiting = asyncio.ensure_future(queued.run())
        await asyncio.sleep(0.05)
        full = await post("c").run()
        assert full is not None and full.status == 503
        queued.hang_up.set()  # leaves the queue: its place is free at once
        assert await asyncio.wait_for(waiting, 5) is None
        later = post("d")
        answered = asyncio.ensure_future(later.run())
        await asyncio.sleep(0.05)
        assert not answered.done()  # queued, not refused
        fast = "tools/list" if era == "modern" else "ping"
        quick = await asyncio.wait_for(post("e", fast, {}).run(), 5)
        assert quick is not None and quick.status == 200
        first.hang_up.set()
        assert await asyncio.wait_for(running, 5) is None
        rig.gate.open.set()
        reply = await asyncio.wait_for(answered, 10)
        assert reply is not None and reply.status == 200
        assert "result" in replies_of(reply)[0]
    finally:
        rig.gate.open.set()
        pools.shutdown()


# -- tools that wait on the client (sampling): a hang-up or cancel ends the wait itself ------


def _waiting_tools() -> list[tuple[str, str]]:
    return [
        (surface, tool)
        for surface in SURFACES
        for tool, facts in Rig(surface).facts.tools.items()
        if facts.waits_on_client
    ]


def _prepare(rig: Rig, surface: str, tool: str) -> dict[str, Any]:
    """What makes the tool ask the client something: a scenario per waiting tool, so a new
    one fails here until it has its own."""
    if (surface, tool) == ("memorize", "merge_knowledge"):
        rig.gate.open.set()  # the embedder answers at once
        for question in ("how to install pip packages", "how to install pip packages now"):
            rig.memory.store_qa(question, "pip install NAME", "pip")
        return {"topic": "pip"}
    raise AssertionError(f"no scenario for {surface} {tool}: add one to _prepare")


def test_the_waiting_tools_are_known() -> None:
    assert _waiting_tools() == [("memorize", "merge_knowledge")]


@pytest.mark.parametrize(("surface", "tool"), _waiting_tools())
async def test_http_2025_a_hang_up_ends_the_sampling_wait_and_frees_the_lane(
    surface: str, tool: str
) -> None:
    """Finding 5 of issue 22: a `merge_knowledge` whose client hung up held a model thread
    for the sampling timeout (300 s), and every later request, `ping` too, waited for it."""
    rig = Rig(surface)
    arguments = _prepare(rig, surface, tool)
    pools = rig.pools(model_threads=1, model_queue=0)
    app = rig.http(pools)
    call = {"name": tool, "arguments": arguments}
    try:
        for attempt in range(2):  # the second finds the lane free again
            data, headers = legacy_call("tools/call", call, f"merge-{attempt}")
            exchange = Exchange(app, data, headers)
            task = asyncio.ensure_future(exchange.run())
            while not exchange.events():
                await asyncio.wait_for(exchange.chunk.wait(), 5)
                exchange.chunk.clear()
            asked = exchange.events()[0]
            assert asked["method"] == "sampling/createMessage"
            data, headers = legacy_call("ping", {}, "ping")
            pong = await asyncio.wait_for(Exchange(app, data, headers).run(), 5)
            assert pong is not None and replies_of(pong)[0]["result"] == {}
            exchange.hang_up.set()
            assert await asyncio.wait_for(task, 5) is None
        assert app.outgoing is not None and app.outgoing.waiting == 0
    finally:
        pools.shutdown()


@pytest.mark.parametrize(("surface", "tool"), _waiting_tools())
def test_stdio_a_cancel_ends_the_sampling_wait_and_frees_the_lane(surface: str, tool: str) -> None:
    rig = Rig(surface)
    arguments = _prepare(rig, surface, tool)
    stdio = Stdio(rig, rig.pools(model_threads=1, model_queue=0))
    try:
        stdio.handshake()
        for attempt in range(3):
            asked = _ask_when_free(stdio, attempt, tool, arguments)
            assert asked["method"] == "sampling/createMessage"
            stdio.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
            assert stdio.reply()["id"] == "ping"
            stdio.cancel(attempt)  # the wait ends: the next attempt finds the lane free
        with pytest.raises(queue.Empty):  # the cancelled calls are never answered
            stdio.reply(timeout=0.2)
    finally:
        stdio.close()


# -- tools that wait on the client lend their model-lane slot meanwhile (REQ-MCP-LANE-001) --


def _other_model_calls(rig: Rig) -> list[tuple[str, dict[str, Any]]]:
    """The surface's model calls that do not themselves wait on the client."""
    calls = [(t, a) for t, a in model_calls(rig) if not rig.facts.tool(t).waits_on_client]
    assert calls, f"{rig.surface_name} has no other model tool to check the lane with"
    return calls


@pytest.mark.parametrize(("surface", "tool"), _waiting_tools())
def test_stdio_calls_left_waiting_on_the_client_do_not_hold_the_lane(
    surface: str, tool: str
) -> None:
    """Issue 33 finding 5: two `merge_knowledge` calls the client never answered held both
    model-lane slots for the sampling limit (300 s): `ping` answered, every memory tool timed
    out. Here the lane has one slot and two such calls wait; the other model tools answer."""
    rig = Rig(surface)
    arguments = _prepare(rig, surface, tool)
    stdio = Stdio(rig, rig.pools(model_threads=1, model_queue=2))
    try:
        stdio.handshake()
        for waiting in ("w1", "w2"):
            stdio.call(waiting, tool, arguments)
            asked = stdio.reply()
            assert asked.get("method") == "sampling/createMessage", asked
        for name, call in _other_model_calls(rig):
            stdio.call(name, name, call)
            answered = stdio.reply(timeout=5)
            assert answered.get("id") == name and "result" in answered, answered
        for waiting in ("w1", "w2"):
            stdio.cancel(waiting)
    finally:
        stdio.close()


@pytest.mark.parametrize(("surface", "tool"), _waiting_tools())
async def test_http_2025_calls_left_waiting_on_the_client_do_not_hold_the_lane(
    surface: str, tool: str
) -> None:
    rig = Rig(surface)
    arguments = _prepare(rig, surface, tool)
    pools = rig.pools(model_threads=1, model_queue=2)
    app = rig.http(pools)
    waits: list[tuple[Exchange, asyncio.Future[Any]]] = []
    try:
        for waiting in ("w1", "w2"):
            data, headers = legacy_call(
                "tools/call", {"name": tool, "arguments": arguments}, waiting
            )
            exchange = Exchange(app, data, headers)
            waits.append((exchange, asyncio.ensure_future(exchange.run())))
            while not exchange.events():
                await asyncio.wait_for(exchange.chunk.wait(), 5)
                exchange.chunk.clear()
            assert exchange.events()[0]["method"] == "sampling/createMessage"
        for name, call in _other_model_calls(rig):
            data, headers = legacy_call("tools/call", {"name": name, "arguments": call}, name)
            reply = await asyncio.wait_for(Exchange(app, data, headers).run(), 5)
            assert reply is not None and reply.status == 200
            assert "result" in replies_of(reply)[0], replies_of(reply)
    finally:
        for exchange, task in waits:
            exchange.hang_up.set()
            await asyncio.wait_for(task, 5)
        pools.shutdown()


def _ask_when_free(stdio: Stdio, request_id: int, tool: str, arguments: Any) -> Any:
    """The first message the call brings, once the lane has room (within 2 s: the cancelled
    call before it needs a moment to leave its thread; on the old code it took 300 s)."""
    for _ in range(100):
        stdio.call(request_id, tool, arguments)
        message = stdio.reply()
        if message.get("error", {}).get("code") != BUSY:
            return message
        time.sleep(0.02)
    raise AssertionError("the model lane never freed up")


# -- tools that wait on the client: the sampling time limit, and progress meanwhile ----------

SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "fused"}, "model": "llm"}
THINKS_S = 0.8  # the client's LLM: four request time limits


def _progress_of(messages: list[dict[str, Any]]) -> list[Any]:
    return [m["params"] for m in messages if m.get("method") == "notifications/progress"]


@pytest.mark.parametrize(("surface", "tool"), _waiting_tools())
async def test_http_2025_a_slow_client_outlives_the_request_limit_with_progress(
    surface: str, tool: str
) -> None:
    """REQ-MEM-SAMPLING-001/002: the call has the sampling limit, and its stream carries
    progress with the client's token while the client's LLM works."""
    rig = Rig(surface)
    arguments = _prepare(rig, surface, tool)
    pools = rig.pools(model_threads=1, model_queue=0)
    app = rig.http(pools, timeout_s=0.2, sampling_timeout_s=30.0)
    call = {"name": tool, "arguments": arguments, "_meta": {"progressToken": 7}}
    try:
        data, headers = legacy_call("tools/call", call, "slow")
        exchange = Exchange(app, data, headers)
        task = asyncio.ensure_future(exchange.run())
        while not exchange.events():
            await asyncio.wait_for(exchange.chunk.wait(), 5)
            exchange.chunk.clear()
        asked = exchange.events()[0]
        assert asked["method"] == "sampling/createMessage"
        await asyncio.sleep(THINKS_S)
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": SAMPLED}
        posted = await Exchange(app, json.dumps(answer).encode(), headers).run()
        assert posted is not None and posted.status == 202
        done = await asyncio.wait_for(task, 10)
        assert done is not None
        messages = exchange.events()
        assert "result" in messages[-1] and messages[-1]["id"] == "slow", messages[-1]
        progress = _progress_of(messages)
        assert len(progress) >= 3 and {p["progressToken"] for p in progress} == {7}
        assert [p["progress"] for p in progress] == list(range(1, len(progress) + 1))
    finally:
        pools.shutdown()


@pytest.mark.parametrize(("surface", "tool"), _waiting_tools())
def test_stdio_a_slow_client_outlives_the_request_limit_with_progress(
    surface: str, tool: str
) -> None:
    rig = Rig(surface)
    arguments = _prepare(rig, surface, tool)
    stdio = Stdio(rig, rig.pools(model_threads=1), timeout_s=0.2, sampling_timeout_s=30.0)
    try:
        stdio.handshake()
        stdio.call(1, tool, arguments, _meta={"progressToken": "p"})
        asked = stdio.reply()
        assert asked["method"] == "sampling/createMessage"
        time.sleep(THINKS_S)
        stdio.send({"jsonrpc": "2.0", "id": asked["id"], "result": SAMPLED})
        messages = []
        while "id" not in (message := stdio.reply()):
            messages.append(message)
        assert message["id"] == 1 and "result" in message, message
        progress = _progress_of(messages)
        assert len(progress) >= 3 and {p["progressToken"] for p in progress} == {"p"}
    finally:
        stdio.close()
