"""A search whose request was given up stops its work (REQ-SEARCH-CANCEL-LDIMSCANCEL-001):
LDIMS's own SEARCH_TIMEOUT and the transports' time limit alike, on stdio and over HTTP. A
store that plays SQLite's interrupt (its slow "statement" runs until the connection's
interrupt aborts it) and a query embedder that lasts until the test lets it finish are
injected through the composition root; the worker pools and transports are the real ones."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from adapters.bootstrap import App, Models
from adapters.http.app import HttpSettings, OriginPolicy, QmdHttpApp
from adapters.mcp.protocol import Session
from adapters.mcp.registry import SurfaceContext, create_surface, surface_facts
from adapters.mcp.workers import Worker, WorkerPools
from domain.lexquery import LexQuery
from domain.model import Collection, LexHit, VectorHit
from domain.profiles import SEED_000
from domain.text import content_hash
from domain.usecases.embedding import EmbedIndex
from tests.fakes import FixedClock, InMemoryStore, app_over
from tests.model_fakes import FakeEmbedder
from tests.unit.test_http_app import ACCEPT, _events, _request
from tests.unit.test_stdio_dispatch import Pipes, _handshake

T0 = "2025-01-01T00:00:00.000Z"
LIMIT_S = 0.5
NOTES = {
    "tokens.md": "# Tokens\n\nRefresh tokens rotate on every use.",
    "deploy.md": "# Deploying\n\nThe pipeline builds images and rolls them out.",
}


class InterruptedStatementError(Exception):
    """What the driver raises in a statement its connection's interrupt aborted."""


class SlowStore(InMemoryStore):
    """A store whose lexical query, while `hold` is set, runs until `interrupt` aborts it
    (SQLite's `interrupt` on the worker's connection), and which notes every index query."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = threading.Event()
        self.interrupted = threading.Event()
        self.statement_ended = threading.Event()
        self.queries: list[str] = []

    def interrupt(self) -> None:
        self.interrupted.set()

    def search_lex(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[LexHit]:
        self.queries.append("lex")
        if self.hold.is_set():
            try:
                if self.interrupted.wait(20):
                    raise InterruptedStatementError("interrupted")
            finally:
                self.statement_ended.set()
        return super().search_lex(query, limit, collection, within)

    def search_vectors(
        self,
        vector: Sequence[float],
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[VectorHit]:
        self.queries.append("vectors")
        return super().search_vectors(vector, limit, collection, within)


class GatedEmbedder(FakeEmbedder):
    """Query embedding (one model step, which runs to its end) lasts while `hold` is set,
    until the test opens `gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = threading.Event()
        self.gate = threading.Event()
        self.returned = threading.Event()

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        if self.hold.is_set():
            self.gate.wait(20)
            self.returned.set()
        return super().embed_queries(texts)


@pytest.fixture
def embedder() -> Iterator[GatedEmbedder]:
    gated = GatedEmbedder()
    yield gated
    gated.gate.set()  # an abandoned model call ends with the test


def _app(store: SlowStore, embedder: FakeEmbedder) -> App:
    store.put_collection(Collection(name="c", path="/c"))
    for path, body in NOTES.items():
        store.upsert_document("c", path, path, content_hash(body), body, T0, T0)
    EmbedIndex(store, store, embedder, FixedClock()).run()
    return app_over(store, Models(embedder=embedder))


def _payload(result: dict[str, Any]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(result["content"][0]["text"])
    return parsed


class Stdio:
    """`surface` over the concurrent stdio transport, its time limit LIMIT_S."""

    def __init__(self, app: App, surface: str, interrupt: Callable[[], None]) -> None:
        context = SurfaceContext("test", request_timeout_s=LIMIT_S)
        self.pipes = Pipes(app, LIMIT_S, surface, context, interrupt)
        _handshake(self.pipes)
        self.next_id = 1

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.pipes.call(self.next_id, tool, arguments)
        reply = self.pipes.reply()
        assert reply["id"] == self.next_id, reply
        return reply

    def close(self) -> None:
        self.pipes.close()


class Http:
    """`surface` over the HTTP app (stateless), its time limit LIMIT_S."""

    def __init__(self, app: App, surface: str, interrupt: Callable[[], None]) -> None:
        services = app.services()
        context = SurfaceContext("test", request_timeout_s=LIMIT_S)

        def worker() -> Worker:
            session = Session(create_surface(surface, services, context), stateless=True)
            return Worker(session, services, interrupt, lambda: None)

        settings = HttpSettings(
            policy=OriginPolicy.build("localhost", {}),
            profile=SEED_000,
            strict_original=False,
            timeout_s=LIMIT_S,
        )
        self.app = QmdHttpApp(
            WorkerPools(worker, threads=2, model_threads=1), settings, None, surface_facts(surface)
        )
        self.next_id = 1

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        params = {"name": tool, "arguments": arguments}
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": params}
        reply = await _request(self.app, "POST", "/mcp", json.dumps(body).encode(), ACCEPT)
        (answer,) = _events(reply)
        assert answer["id"] == self.next_id, answer
        return dict(answer)

    def close(self) -> None:
        self.app.pools.shutdown()


Transport = Stdio | Http


async def _call(transport: Transport, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if isinstance(transport, Http):
        return await transport.call(tool, arguments)
    return transport.call(tool, arguments)


@pytest.fixture(params=["stdio", "http"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _open(kind: str, app: App, surface: str, store: SlowStore) -> Transport:
    return (Stdio if kind == "stdio" else Http)(app, surface, store.interrupt)


async def test_a_timed_out_ldims_search_has_its_running_statement_aborted(
    kind: str, embedder: GatedEmbedder
) -> None:
    """SEARCH_TIMEOUT at the limit, and at that time the statement the search is running is
    aborted through its worker's connection: the worker is free for the next call at once,
    not when the statement would have ended."""
    store = SlowStore()
    transport = _open(kind, _app(store, embedder), "ldims", store)
    try:
        store.hold.set()
        reply = await _call(transport, "searchDocuments", {"query": "refresh tokens"})
        assert _payload(reply["result"])["errorCode"] == "SEARCH_TIMEOUT"
        # the statement would otherwise run 20 s
        assert store.interrupted.wait(2.0), "the timed-out search's statement ran on"
        assert store.statement_ended.wait(2.0)
        store.hold.clear()
        # answered within the surface's limit: no search left behind holds the connection
        found = await _call(transport, "searchDocuments", {"query": "refresh tokens"})
        assert _payload(found["result"])["results"][0]["documentId"] == "c/tokens.md"
    finally:
        store.hold.clear()
        transport.close()


async def test_a_timed_out_ldims_search_stops_after_its_model_call(
    kind: str, embedder: GatedEmbedder
) -> None:
    """The query embedding outlives the limit: SEARCH_TIMEOUT at the limit; when the model
    call ends, the search left behind queries nothing more (no vector search, no lexical
    pass, no results read) and the next search runs at once."""
    store = SlowStore()
    transport = _open(kind, _app(store, embedder), "ldims", store)
    try:
        embedder.hold.set()
        reply = await _call(transport, "searchDocuments", {"query": "refresh tokens"})
        assert _payload(reply["result"])["errorCode"] == "SEARCH_TIMEOUT"
        store.queries.clear()
        embedder.hold.clear()
        embedder.gate.set()
        assert embedder.returned.wait(5)
        time.sleep(0.3)  # what the search left behind would do now, it does at once
        assert store.queries == [], store.queries
        found = await _call(transport, "searchDocuments", {"query": "refresh tokens"})
        assert _payload(found["result"])["results"][0]["documentId"] == "c/tokens.md"
    finally:
        transport.close()


async def test_a_request_past_the_transports_limit_stops_too(
    kind: str, embedder: GatedEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """The same rule where the transport answers the timeout (-32001, the spec surface's
    `vsearch`): once the model call ends, the search given up queries nothing more, and its
    stop is no failure to log with a stack."""
    store = SlowStore()
    transport = _open(kind, _app(store, embedder), "spec", store)
    try:
        embedder.hold.set()
        reply = await _call(transport, "vsearch", {"query": "refresh tokens"})
        assert reply["error"]["code"] == -32001, reply
        store.queries.clear()
        embedder.hold.clear()
        embedder.gate.set()
        assert embedder.returned.wait(5)
        time.sleep(0.3)
        assert store.queries == [], store.queries
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
        found = await _call(transport, "vsearch", {"query": "refresh tokens"})
        assert "result" in found and not found["result"].get("isError"), found
    finally:
        transport.close()
