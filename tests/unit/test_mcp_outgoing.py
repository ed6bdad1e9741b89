"""Server-to-client requests (docs/decisions/0039): the correlator, and the stdio loop that
keeps reading while a tool waits for the client's answer, over the memorize surface on fakes."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest

from adapters.mcp.memorize import MemorizeSurface
from adapters.mcp.outgoing import ClientRequestError, Correlator
from adapters.mcp.protocol import Session
from adapters.mcp.stdio import serve_stdio
from domain.usecases.memorize import Memorizer, Thresholds
from tests.fakes import FixedClock, InMemoryMemoryStore
from tests.model_fakes import FakeEmbedder


def test_a_request_gets_its_result_from_another_thread() -> None:
    correlator = Correlator("t")
    sent: list[dict[str, Any]] = []

    def emit(message: dict[str, Any]) -> None:
        sent.append(message)
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"ok": 1}}
        threading.Thread(target=correlator.deliver, args=(answer,)).start()

    assert correlator.request(emit, "sampling/createMessage", {"x": 1}) == {"ok": 1}
    assert sent[0]["method"] == "sampling/createMessage" and sent[0]["id"].startswith("t-")
    assert correlator.waiting == 0
    assert not correlator.deliver({"jsonrpc": "2.0", "id": sent[0]["id"], "result": {}})  # late


def test_request_ids_are_unguessable() -> None:
    """REQ-SEC-OUT-001: no counter; each id carries at least 128 random bits."""
    correlator = Correlator("t")
    sent: list[str] = []

    def emit(message: dict[str, Any]) -> None:
        sent.append(message["id"])
        correlator.deliver({"jsonrpc": "2.0", "id": message["id"], "result": {}})

    for _ in range(50):
        correlator.request(emit, "sampling/createMessage", {})
    assert len(set(sent)) == 50
    assert "t-1" not in sent and "t-2" not in sent
    assert all(len(i) - len("t-") >= 22 for i in sent)  # 22 url-safe characters = 132 bits


def test_an_answer_is_taken_only_from_the_requester() -> None:
    """REQ-SEC-OUT-001: another client that learns the id cannot answer in its place."""
    correlator = Correlator("t")
    outcome: list[dict[str, Any]] = []
    asked = threading.Event()
    ids: list[str] = []

    def emit(message: dict[str, Any]) -> None:
        ids.append(message["id"])
        asked.set()

    def ask() -> None:
        outcome.append(correlator.request(emit, "m", {}, timeout=5, owner=("a", "")))

    thread = threading.Thread(target=ask)
    thread.start()
    assert asked.wait(5)
    forged = {"jsonrpc": "2.0", "id": ids[0], "result": {"text": "attacker"}}
    assert not correlator.deliver(forged, ("b", ""))
    assert not correlator.deliver(forged)  # no owner is not the owner either
    assert correlator.deliver(
        {"jsonrpc": "2.0", "id": ids[0], "result": {"text": "mine"}}, ("a", "")
    )
    thread.join(5)
    assert outcome == [{"text": "mine"}]


def test_a_cancelled_call_stops_waiting_at_once() -> None:
    correlator = Correlator("t")
    callbacks: list[Any] = []

    def watch(callback: Any) -> Any:
        callbacks.append(callback)
        return lambda: callbacks.remove(callback)

    threading.Timer(0.05, lambda: [c() for c in list(callbacks)]).start()
    with pytest.raises(ClientRequestError, match="cancelled"):
        correlator.request(lambda _m: None, "m", {}, timeout=30, watch=watch)
    assert callbacks == [] and correlator.waiting == 0


def test_an_error_answer_a_timeout_and_a_close_fail_the_request() -> None:
    correlator = Correlator("t")

    def refuse(message: dict[str, Any]) -> None:
        error = {"code": -32601, "message": "Method not found"}
        correlator.deliver({"jsonrpc": "2.0", "id": message["id"], "error": error})

    with pytest.raises(ClientRequestError) as refused:
        correlator.request(refuse, "sampling/createMessage", {})
    assert refused.value.code == -32601
    with pytest.raises(ClientRequestError, match="did not answer"):
        correlator.request(lambda _m: None, "sampling/createMessage", {}, timeout=0.05)
    threading.Timer(0.05, correlator.close).start()
    with pytest.raises(ClientRequestError, match="closed"):
        correlator.request(lambda _m: None, "sampling/createMessage", {}, timeout=5)
    with pytest.raises(ClientRequestError):  # closed for good
        correlator.request(lambda _m: None, "sampling/createMessage", {})


class Client:
    """The client end of two pipes around `serve_stdio`."""

    def __init__(self, session: Session) -> None:
        server_in, self._to_server = os.pipe()
        self._from_server, server_out = os.pipe()
        self._writer = os.fdopen(self._to_server, "wb", buffering=0)
        self._reader = os.fdopen(self._from_server, "rb")
        stdin = os.fdopen(server_in, "rb")
        stdout = os.fdopen(server_out, "wb", buffering=0)

        def serve() -> None:
            serve_stdio(session, stdin=stdin, stdout=stdout)
            stdout.close()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()

    def send(self, message: dict[str, Any]) -> None:
        self._writer.write(json.dumps(message).encode() + b"\n")

    def receive(self) -> dict[str, Any]:
        line = self._reader.readline()
        assert line, "the server closed stdout"
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def call(self, request_id: int, tool: str, arguments: dict[str, Any]) -> None:
        params = {"name": tool, "arguments": arguments}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    def close(self) -> None:
        self._writer.close()
        self.thread.join(timeout=10)


def test_stdio_sends_sampling_and_keeps_reading_for_the_answer() -> None:
    memory = Memorizer(InMemoryMemoryStore(), FakeEmbedder(), FixedClock(), Thresholds(0.5, 0.5))
    client = Client(Session(MemorizeSurface(memory, "test")))
    capabilities = {"sampling": {}}
    init = {"protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": {}}
    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    assert client.receive()["id"] == 1
    for n, question in enumerate(
        ("how to install pip packages", "how to install pip packages now")
    ):
        client.call(10 + n, "store_qa", {"question": question, "answer": "pip", "topic": "pip"})
        assert client.receive()["id"] == 10 + n
    client.call(20, "merge_knowledge", {"topic": "pip"})
    asked = client.receive()
    assert asked["method"] == "sampling/createMessage"
    # a request sent while the tool waits is answered after it, in order
    client.send({"jsonrpc": "2.0", "id": 21, "method": "tools/list"})
    content = {"type": "text", "text": "use pip"}
    client.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"content": content}})
    merged = client.receive()
    assert merged["id"] == 20
    assert merged["result"]["structuredContent"]["merged"][0]["text"] == "use pip"
    assert client.receive()["id"] == 21
    client.close()
    assert not client.thread.is_alive()


def test_closing_stdin_while_the_tool_waits_ends_the_wait() -> None:
    memory = Memorizer(InMemoryMemoryStore(), FakeEmbedder(), FixedClock(), Thresholds(0.5, 0.5))
    client = Client(Session(MemorizeSurface(memory, "test")))
    init = {"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}, "clientInfo": {}}
    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    client.receive()
    for n, question in enumerate(
        ("how to install pip packages", "how to install pip packages now")
    ):
        client.call(10 + n, "store_qa", {"question": question, "answer": "pip", "topic": "pip"})
        client.receive()
    client.call(20, "merge_knowledge", {})
    assert client.receive()["method"] == "sampling/createMessage"
    client._writer.close()  # the client goes away without answering
    reply = client.receive()
    result = reply["result"]["structuredContent"]
    assert reply["id"] == 20 and result["merged"] == []
    assert "closed stdin" in result["skipped"][0]["reason"]
    client.thread.join(timeout=10)
    assert not client.thread.is_alive()
    assert [r.merged for r in memory_records(memory)] == [False, False]


def memory_records(memory: Memorizer) -> list[Any]:
    store = memory._store  # the fake behind it
    assert isinstance(store, InMemoryMemoryStore)
    return store.records()
