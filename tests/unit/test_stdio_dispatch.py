"""The concurrent stdio transport (docs/decisions/0033), driven over pipes with the spec
surface on fakes: a slow model request in flight does not hold up `status` and `get`
(REQ-MCP-STDIO-003); `notifications/cancelled` cancels in-flight work and leaves it
unanswered, and the time limit (REQ-MCP-STDIO-004)."""

from __future__ import annotations

import json
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from adapters.bootstrap import App
from adapters.mcp.protocol import Session
from adapters.mcp.registry import SurfaceContext, create_surface
from adapters.mcp.stdio import serve_stdio
from adapters.mcp.workers import Worker, WorkerPools
from adapters.models.bundle import Models
from domain.model import Collection
from tests.fakes import InMemoryStore, app_over
from tests.model_fakes import FakeEmbedder

CONTEXT = SurfaceContext("test")


class GatedEmbedder(FakeEmbedder):
    """A model call that lasts until the test opens the gate."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate
        self.entered = threading.Event()

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.entered.set()
        self.gate.wait(20)
        return super().embed_queries(texts)


def _app(embedder: FakeEmbedder) -> App:
    store = InMemoryStore()
    store.put_collection(Collection("notes", "/notes"))
    body = "# Alpha\n\nThe alpha note.\n"
    store.upsert_document("notes", "alpha.md", "Alpha", "a1" * 32, body, "t", "t")
    vector = FakeEmbedder().embed_documents([("Alpha", body)])[0]
    store.store_chunk_vectors("a1" * 32, [(0, 0, vector)], "fake-embed", "", "t")
    return app_over(store, Models(embedder=embedder))


class Pipes:
    """A stdio server on a thread, spoken to through two pipes."""

    def __init__(
        self,
        app: App,
        timeout_s: float | None = None,
        surface: str = "spec",
        context: SurfaceContext = CONTEXT,
        interrupt: Callable[[], None] = lambda: None,
        **serve_options: Any,
    ) -> None:
        """`interrupt`: what aborts a worker's running statement (a fake store's, or none)."""
        self.app = app
        read_in, self._write_in = os.pipe()
        self._read_out, write_out = os.pipe()
        services = app.services()

        def worker() -> Worker:  # the fakes are shared: they are read-only here
            session = Session(create_surface(surface, services, context))
            return Worker(session, services, interrupt, lambda: None)

        self.pools = WorkerPools(worker, threads=4, model_threads=1)
        session = Session(create_surface(surface, services, context))
        self.stdin = os.fdopen(read_in, "rb", buffering=0)
        self.stdout = os.fdopen(write_out, "wb", buffering=0)
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self.thread = threading.Thread(
            target=serve_stdio,
            args=(session, self.stdin, self.stdout),
            kwargs={"pools": self.pools, "timeout_s": timeout_s, **serve_options},
            daemon=True,
        )
        self.thread.start()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with os.fdopen(self._read_out, "rb") as out:
            for line in out:
                self.replies.put(json.loads(line))

    def send(self, message: dict[str, Any]) -> None:
        os.write(self._write_in, json.dumps(message).encode() + b"\n")

    def call(self, request_id: int, tool: str, arguments: dict[str, Any]) -> None:
        params = {"name": tool, "arguments": arguments}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    def reply(self, timeout: float = 10.0) -> dict[str, Any]:
        return self.replies.get(timeout=timeout)

    def close(self) -> None:
        os.close(self._write_in)
        self.thread.join(20)
        self.stdout.close()
        self.pools.shutdown()


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def _handshake(pipes: Pipes) -> None:
    pipes.send(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}},
        }
    )
    assert pipes.reply()["id"] == 0
    pipes.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def test_status_and_get_are_answered_while_a_model_request_runs(gate: threading.Event) -> None:
    embedder = GatedEmbedder(gate)
    pipes = Pipes(_app(embedder))
    _handshake(pipes)
    pipes.call(1, "vsearch", {"query": "alpha"})
    assert embedder.entered.wait(10), "the model call never started"
    pipes.call(2, "status", {})
    pipes.call(3, "get", {"file": "notes/alpha.md"})
    pipes.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
    early = {pipes.reply()["id"] for _ in range(3)}
    assert early == {2, 3, 4}  # answered while request 1 still waits on its model
    assert pipes.replies.empty()
    gate.set()
    slow = pipes.reply()
    assert slow["id"] == 1 and "alpha" in json.dumps(slow["result"])
    pipes.close()


def test_a_cancelled_request_gets_no_reply_and_others_go_on(gate: threading.Event) -> None:
    embedder = GatedEmbedder(gate)
    pipes = Pipes(_app(embedder))
    _handshake(pipes)
    pipes.call(1, "vsearch", {"query": "alpha"})  # runs, blocked on its model
    assert embedder.entered.wait(10)
    pipes.call(2, "vsearch", {"query": "beta"})  # queued behind it in the model lane
    for request_id in (2, 1):
        pipes.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "user"},
            }
        )
    pipes.call(3, "status", {})
    assert pipes.reply()["id"] == 3
    gate.set()
    pipes.call(4, "get", {"file": "notes/alpha.md"})
    assert pipes.reply()["id"] == 4
    pipes.close()
    assert pipes.replies.empty()  # neither cancelled request was answered


def test_a_request_past_the_time_limit_is_answered_with_a_timeout(
    gate: threading.Event,
) -> None:
    embedder = GatedEmbedder(gate)
    pipes = Pipes(_app(embedder), timeout_s=0.3)
    _handshake(pipes)
    pipes.call(1, "vsearch", {"query": "alpha"})
    reply = pipes.reply()
    assert reply["id"] == 1
    assert reply["error"] == {"code": -32001, "message": "Request timed out after 0.3 s"}
    gate.set()
    pipes.close()
    assert pipes.replies.empty()  # the late answer is dropped


def test_one_log_line_per_request(caplog: pytest.LogCaptureFixture) -> None:
    pipes = Pipes(_app(FakeEmbedder()))
    with caplog.at_level("DEBUG", logger="qmd.mcp"):
        _handshake(pipes)
        pipes.call(1, "status", {})
        assert pipes.reply()["id"] == 1
        # a tools/call naming no tool is still a JSON-RPC error (an unknown tool is data on
        # this surface, REQ-SPEC-ERR-002)
        pipes.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}})
        assert pipes.reply()["id"] == 2
        pipes.close()
    lines = [r.getMessage() for r in caplog.records if " stdio " in r.getMessage()]
    assert any(re.search(r" stdio initialize ok \(\d+ms\)$", line) for line in lines), lines
    assert any(re.search(r" stdio tools/call status ok \(\d+ms\)$", line) for line in lines)
    assert any(re.search(r" stdio tools/call None error -32602 \(\d+ms\)$", x) for x in lines)


class NativeCall(GatedEmbedder):
    """A model call that no cancel reaches (a load or a decode inside llama.cpp): it ends when
    the gate opens, whatever happened to its request."""


def test_the_end_of_input_does_not_wait_for_work_past_its_answer(gate: threading.Event) -> None:
    """REQ-SPEC-STDIO-003: the request is answered (-32001), stdin closes, and serving ends
    within the grace although the worker is still inside its model call."""
    embedder = NativeCall(gate)
    pipes = Pipes(_app(embedder), timeout_s=0.3)
    _handshake(pipes)
    pipes.call(1, "vsearch", {"query": "alpha"})
    assert embedder.entered.wait(10)
    assert pipes.reply()["error"]["code"] == -32001
    started = time.monotonic()
    os.close(pipes._write_in)
    pipes.thread.join(8)
    assert not pipes.thread.is_alive(), "serving waited for the stuck model call"
    assert time.monotonic() - started < 4.5  # the grace is 3 s
    gate.set()
    pipes.pools.shutdown()


def test_work_stuck_past_the_grace_ends_the_process_instead_of_closing(
    gate: threading.Event,
) -> None:
    """REQ-SPEC-STDIO-003: with work still running after the grace, `on_stuck` (the real
    server's immediate exit) is called, never `on_close`, which would close the index and
    the models under it; with none, `on_close` is."""
    calls: list[str] = []
    embedder = NativeCall(gate)
    pipes = Pipes(
        _app(embedder),
        timeout_s=0.3,
        on_close=lambda: calls.append("close"),
        on_stuck=lambda: calls.append("stuck"),
        exit_grace_s=0.2,
    )
    _handshake(pipes)
    pipes.call(1, "vsearch", {"query": "alpha"})
    assert pipes.reply()["id"] == 1
    os.close(pipes._write_in)
    pipes.thread.join(5)
    assert calls == ["stuck"]
    gate.set()
    pipes.pools.shutdown()
    calls.clear()
    pipes = Pipes(
        _app(FakeEmbedder()),
        on_close=lambda: calls.append("close"),
        on_stuck=lambda: calls.append("stuck"),
    )
    _handshake(pipes)
    pipes.call(1, "vsearch", {"query": "alpha"})
    assert "result" in pipes.reply()
    os.close(pipes._write_in)
    pipes.thread.join(5)
    assert calls == ["close"]
    pipes.pools.shutdown()
