"""A slow reranker meets the request's time limit (REQ-SEARCH-DEGRADE-001): deep search answers
with the fused results before the limit and says that reranking was skipped and why, instead
of the transport's timeout error. A fake reranker that takes as long as the test lets it is
injected through the composition root; the deadline is the real transport's (the concurrent
stdio dispatcher and its worker pools) or set as a transport sets it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from adapters.bootstrap import App, Models
from adapters.fs.deadline import request_deadline
from adapters.http.app import HttpSettings, OriginPolicy, QmdHttpApp
from adapters.mcp.protocol import Session
from adapters.mcp.registry import SurfaceContext, create_surface, surface_facts
from adapters.mcp.workers import Worker, WorkerPools
from domain.model import Collection
from domain.profiles import ORIGINAL_2_8_3, SEED_000
from domain.text import content_hash
from domain.usecases.chunks import ChunkKeeper
from domain.usecases.embedding import EmbedIndex
from domain.usecases.projmem import ChunkSearch, DeepOptions
from domain.usecases.search import SearchRequest
from domain.usecases.trace import SearchTrace
from tests.fakes import FixedClock, InMemoryChunkIndex, InMemoryStore, app_over
from tests.model_fakes import FakeEmbedder, FakeExpander, FakeReranker
from tests.unit.test_http_app import ACCEPT, _events, _request
from tests.unit.test_stdio_dispatch import Pipes, _handshake

T0 = "2025-01-01T00:00:00.000Z"
NOTES = {
    "auth.md": "# Auth\n\nHow callers sign in.\n\n## Tokens\n\nRefresh tokens rotate on every "
    "use and expire after thirty days.\n",
    "deploy.md": "# Deploying\n\nThe pipeline builds images and signs them in CI.\n",
}


class SlowReranker(FakeReranker):
    """A reranker that takes until the test ends (at most 20 s) for every call."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__("slow-rerank")
        self.release = release
        self.calls = 0

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls += 1
        self.release.wait(20)
        return super().rerank(query, documents)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # the abandoned rerank calls end with the test


def _app(reranker: FakeReranker) -> tuple[App, InMemoryStore]:
    store = InMemoryStore()
    store.put_collection(Collection(name="notes", path="/notes"))
    for path, body in NOTES.items():
        store.upsert_document("notes", path, path, content_hash(body), body, T0, T0)
    embedder = FakeEmbedder()
    EmbedIndex(store, store, embedder, FixedClock()).run()
    models = Models(embedder=embedder, reranker=reranker, expander=FakeExpander())
    return app_over(store, models), store


@pytest.mark.slow  # waits on real time by design: left out of `make test-fast`
def test_query_over_stdio_answers_fused_results_before_the_time_limit(
    release: threading.Event,
) -> None:
    reranker = SlowReranker(release)
    pipes = Pipes(_app(reranker)[0], timeout_s=2.0)
    try:
        _handshake(pipes)
        began = time.monotonic()
        pipes.call(1, "query", {"query": "sign in"})
        reply = pipes.reply()
        took = time.monotonic() - began
        assert reply["id"] == 1 and "result" in reply, reply  # not -32001
        assert took < 2.0 and reranker.calls == 1
        result = reply["result"]
        assert result.get("isError") is not True, result
        assert result["structuredContent"]["results"], result  # the fused results
        (degraded,) = result["structuredContent"]["degraded"]
        assert degraded["stage"] == "rerank" and "time limit" in degraded["reason"]
        assert "rerank skipped" in result["content"][-1]["text"]
    finally:
        release.set()
        pipes.close()


def _chunk_search(reranker: FakeReranker) -> ChunkSearch:
    app, store = _app(reranker)
    chunks = InMemoryChunkIndex(store)
    ChunkKeeper(store, chunks).sync()
    return ChunkSearch(store, app.searcher, chunks, chunks, time.perf_counter).with_profile(
        SEED_000
    )


def test_deep_search_reports_the_skipped_rerank_in_its_stages(release: threading.Event) -> None:
    search = _chunk_search(SlowReranker(release))
    began = time.monotonic()
    with request_deadline(time.monotonic() + 1.5):
        report = search.deep_search("sign in", 5, None, DeepOptions())
    assert time.monotonic() - began < 1.5
    assert report.hits and report.reranked is False
    assert all(hit.reranker_score is None for hit in report.hits)
    stages = {stage.name: stage for stage in report.stages}
    assert stages["reranking"].skipped and "time limit" in stages["reranking"].note
    assert not stages["blending"].skipped  # the fused results were blended and answered
    assert any("rerank skipped" in warning for warning in report.warnings)


def test_no_time_left_skips_the_rerank_without_calling_it(release: threading.Event) -> None:
    reranker = SlowReranker(release)
    searcher = _app(reranker)[0].searcher.with_profile(SEED_000)
    trace = SearchTrace()
    with request_deadline(time.monotonic() - 1):
        results = searcher.hybrid_query("sign in", SearchRequest(trace=trace))
    assert results and reranker.calls == 0
    # the expansion before it had no time either (REQ-SEARCH-EXPAND-TIME-001)
    assert [(d.stage, d.reason) for d in trace.degradations] == [
        ("expansion", "the request's time limit left no time for it"),
        ("rerank", "the request's time limit left no time for it"),
    ]


def test_a_fast_reranker_within_the_limit_still_reranks() -> None:
    searcher = _app(FakeReranker())[0].searcher.with_profile(SEED_000)
    trace = SearchTrace()
    with request_deadline(time.monotonic() + 30):
        results = searcher.hybrid_query("sign in", SearchRequest(trace=trace, explain=True))
    assert results and trace.degradations == []
    assert trace.steps["reranking"].ran


def test_the_original_profile_is_not_cut_short(release: threading.Event) -> None:
    """The compat surface answers as the original, which has no such degrade: its rerank runs
    to its end whatever the deadline (the transport's timeout answers a slow one)."""
    searcher = _app(FakeReranker())[0].searcher.with_profile(ORIGINAL_2_8_3)
    trace = SearchTrace()
    with request_deadline(time.monotonic() - 1):
        searcher.hybrid_query("sign in", SearchRequest(trace=trace))
    assert trace.degradations == [] and trace.steps["reranking"].ran


@pytest.mark.slow  # waits on real time by design: left out of `make test-fast`
async def test_query_over_http_answers_fused_results_before_the_time_limit(
    release: threading.Event,
) -> None:
    """The same over the HTTP app: its worker runs the request under its deadline too."""
    services = _app(SlowReranker(release))[0].services()

    def worker() -> Worker:
        session = Session(create_surface("spec", services, SurfaceContext("t")), stateless=True)
        return Worker(session, services, lambda: None, lambda: None)

    settings = HttpSettings(
        policy=OriginPolicy.build("localhost", {}),
        profile=SEED_000,
        strict_original=False,
        timeout_s=2.0,
    )
    app = QmdHttpApp(
        WorkerPools(worker, threads=2, model_threads=1), settings, None, surface_facts("spec")
    )
    call = {"name": "query", "arguments": {"query": "sign in"}}
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
    began = time.monotonic()
    reply = await _request(app, "POST", "/mcp", body.encode(), ACCEPT)
    assert time.monotonic() - began < 2.0
    (answer,) = _events(reply)
    assert answer["id"] == 3 and "result" in answer, answer
    structured = answer["result"]["structuredContent"]
    assert structured["results"] and structured["degraded"][0]["stage"] == "rerank"
    release.set()
    app.pools.shutdown()


def test_a_search_that_cannot_say_so_is_not_cut_short() -> None:
    """REST /query has no trace to report a skipped stage in: its rerank runs as before."""
    searcher = _app(FakeReranker())[0].searcher.with_profile(SEED_000)
    with request_deadline(time.monotonic() - 1):
        results = searcher.hybrid_query("sign in", SearchRequest(explain=True))
    assert results and results[0].explanation is not None
    assert results[0].explanation.blend_weight < 1.0  # blended with a rerank score
