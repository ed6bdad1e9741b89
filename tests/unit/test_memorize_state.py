"""Server-to-client requests bound to their client and call (REQ-SEC-OUT-001..004,
REQ-MCP-HTTP-010), over the memorize surface on fakes: findings 6 and 11 of issue 22."""

from __future__ import annotations

import asyncio
import base64
import json
import queue
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from adapters.mcp.memorize import MemorizeSurface
from adapters.mcp.protocol import Session
from adapters.mcp.workers import Job
from domain.memory import MemoryRecord
from domain.usecases.memorize import Memorizer, Thresholds
from tests.fakes import FixedClock, InMemoryMemoryStore
from tests.guarantees import Exchange, Rig, Stdio, legacy_call, modern_call
from tests.model_fakes import FakeEmbedder

MODERN = "2026-07-28"
PAIRS = ("how to install pip packages", "how to install pip packages now")


def _memory() -> tuple[Memorizer, InMemoryMemoryStore]:
    store = InMemoryMemoryStore()
    memory = Memorizer(store, FakeEmbedder(), FixedClock(), Thresholds(0.5, 0.5))
    for question in PAIRS:
        memory.store_qa(question, "pip install NAME", "pip")
    memory.store_qa("how long to boil an egg", "nine minutes", "eggs")
    return memory, store


def _modern(session: Session, params: dict[str, Any]) -> dict[str, Any]:
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {**params, "_meta": envelope},
    }
    reply = session.handle_message(message)
    assert reply is not None
    result: dict[str, Any] = reply["result"]
    return result


def _answers(first: dict[str, Any], text: str) -> dict[str, Any]:
    content = {"type": "text", "text": text}
    return {key: {"role": "assistant", "content": content} for key in first["inputRequests"]}


def _plan(session: Session, arguments: dict[str, Any]) -> dict[str, Any]:
    first = _modern(session, {"name": "merge_knowledge", "arguments": arguments})
    assert first["resultType"] == "input_required"
    return first


def test_a_genuine_request_state_merges() -> None:
    memory, _store = _memory()
    session = Session(MemorizeSurface(memory, "test"))
    first = _plan(session, {"topic": "pip"})
    retry = {
        "name": "merge_knowledge",
        "arguments": {"topic": "pip"},
        "inputResponses": _answers(first, "use pip"),
        "requestState": first["requestState"],
    }
    done = _modern(session, retry)
    assert [k["text"] for k in done["structuredContent"]["merged"]] == ["use pip"]


def _refused(result: dict[str, Any]) -> None:
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "invalid-argument"
    assert "requestState was not issued by this server" in result["content"][0]["text"]


def test_a_forged_altered_or_re_aimed_request_state_is_refused() -> None:
    """Finding 6: an unsigned state naming any records fused them into attacker text."""
    memory, store = _memory()
    session = Session(MemorizeSurface(memory, "test"))
    ids = [r.id for r in store.records()]
    egg = next(r.id for r in store.records() if r.topic == "eggs")
    forged_plan = {"v": 1, "threshold": 0.0, "groups": {"g": {"topic": "eggs", "ids": ids}}}
    forged = base64.urlsafe_b64encode(json.dumps(forged_plan).encode()).decode()
    first = _plan(session, {"topic": "pip"})
    genuine = first["requestState"]
    payload, _, signature = genuine.partition(".")
    decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    decoded["groups"] = {"g": {"topic": "eggs", "ids": ids}}
    altered_payload = base64.urlsafe_b64encode(json.dumps(decoded).encode()).decode().rstrip("=")
    for state, arguments in [
        (forged, {"topic": "pip"}),
        (f"{altered_payload}.{signature}", {"topic": "pip"}),
        (genuine, {"topic": "eggs"}),  # made for another call
        (genuine, {"topic": "pip", "threshold": 0.1}),
        (genuine[:-2] + ("AA" if not genuine.endswith("AA") else "BB"), {"topic": "pip"}),
    ]:
        retry = {
            "name": "merge_knowledge",
            "arguments": arguments,
            "inputResponses": {"g": {"role": "assistant", "content": {"type": "text", "text": "x"}}}
            | _answers(first, "attacker text"),
            "requestState": state,
        }
        _refused(_modern(session, retry))
    stored: Sequence[MemoryRecord] = store.records()
    assert not any(r.merged for r in stored)
    assert all(r.text != "attacker text" for r in stored) and egg in {r.id for r in stored}


async def test_a_sampling_answer_is_taken_only_from_the_requester() -> None:
    """Finding 6: another client could POST the answer to someone's sampling request (the ids
    were `qmd-http-1`, `-2`, …) and its text became the stored knowledge."""
    rig = Rig("memorize")
    rig.gate.open.set()
    for question in PAIRS:
        rig.memory.store_qa(question, "pip install NAME", "pip")
    pools = rig.pools(model_threads=1, model_queue=0)
    app = rig.http(pools)
    try:
        data, headers = legacy_call(
            "tools/call", {"name": "merge_knowledge", "arguments": {"topic": "pip"}}, 5
        )
        mine = Exchange(app, data, headers, client="127.0.0.1")
        task = asyncio.ensure_future(mine.run())
        while not mine.events():
            await asyncio.wait_for(mine.chunk.wait(), 5)
            mine.chunk.clear()
        asked = mine.events()[0]
        assert not asked["id"].endswith("-1") and len(asked["id"]) > 20
        for client, text in (("127.0.0.2", "attacker text"), ("127.0.0.1", "use pip")):
            answer = {
                "jsonrpc": "2.0",
                "id": asked["id"],
                "result": {"role": "assistant", "content": {"type": "text", "text": text}},
            }
            body = json.dumps(answer).encode()
            posted = await Exchange(app, body, headers, client=client).run()
            assert posted is not None and posted.status == 202
            if client == "127.0.0.2":
                await asyncio.sleep(0.1)
                assert not task.done()  # still waiting for its own client
        reply = await asyncio.wait_for(task, 5)
        assert reply is not None
        merged = json.loads(reply.body.decode().split("data: ")[-1])["result"]
        assert [k["text"] for k in merged["structuredContent"]["merged"]] == ["use pip"]
    finally:
        pools.shutdown()


async def test_missing_sampling_capability_is_http_400_in_the_2026_era() -> None:
    """Finding 11 (REQ-MCP-HTTP-010): -32021 came with HTTP 200."""
    rig = Rig("memorize")
    pools = rig.pools()
    app = rig.http(pools)
    try:
        data, headers = modern_call("tools/call", {"name": "merge_knowledge", "arguments": {}})
        reply = await Exchange(app, data, headers).run()
        assert reply is not None and reply.status == 400
        assert json.loads(reply.body)["error"]["code"] == -32021
    finally:
        pools.shutdown()


class GatedWrites(InMemoryMemoryStore):
    """A memory whose writes wait for the test (to cancel inside a committed write)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.writing = threading.Event()

    def put(self, records: Sequence[MemoryRecord]) -> None:
        self.writing.set()
        self.gate.wait(10)
        super().put(records)


def test_a_cancelled_store_is_not_written() -> None:
    """Finding 6: a `store_qa` cancelled while it embedded was still written."""
    rig = Rig("memorize")
    stdio = Stdio(rig, rig.pools(model_queue=4))
    try:
        stdio.handshake()
        stdio.call(1, "store_qa", {"question": "q?", "answer": "a.", "topic": "t"})
        assert rig.gate.reached()  # embedding, nothing written yet
        stdio.cancel(1)
        rig.gate.open.set()
        stdio.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert stdio.reply()["id"] == 2
        stdio.call(3, "query_qa", {"question": "q?", "context": "t"})
        found = stdio.reply()
        assert found["id"] == 3 and found["result"]["structuredContent"]["answers"] == []
        assert rig.memory_store.records() == []
        with pytest.raises(queue.Empty):
            stdio.reply(timeout=0.1)
    finally:
        rig.gate.open.set()
        stdio.close()


def test_a_cancel_after_the_write_committed_is_refused_and_the_reply_says_stored() -> None:
    rig = Rig("memorize")
    writes = GatedWrites()
    rig.memory = Memorizer(writes, FakeEmbedder(), FixedClock(), Thresholds(0.5, 0.5))
    stdio = Stdio(rig, rig.pools())
    try:
        stdio.handshake()
        stdio.call(1, "store_qa", {"question": "q?", "answer": "a.", "topic": "t"})
        assert writes.writing.wait(5)  # committed, in the middle of its write
        stdio.cancel(1)
        writes.gate.set()
        reply = stdio.reply()
        assert reply["id"] == 1 and reply["result"]["structuredContent"]["created"] is True
        assert [r.question for r in writes.records()] == ["q?"]
    finally:
        writes.gate.set()
        rig.gate.open.set()
        stdio.close()


def test_a_job_refuses_a_cancel_once_committed_and_a_commit_once_cancelled() -> None:
    committed, cancelled = Job(), Job()
    assert committed.commit() and not committed.cancel() and not committed.cancelled
    assert cancelled.cancel() and not cancelled.commit()
