"""A model call whose request is given up stops at its next step (REQ-SEARCH-CANCEL-MODEL-001).

The llama.cpp adapters run the project's small GGUF models (scripts/prepare_models.py); the
remote adapters' HTTP client runs against a closed loopback port, so any request it made would
fail with a different error. The stop check is injected as the composition root injects the
served request's (`RequestTimeBudget.check`): `GiveUpAfter(n)` lets n checks pass and raises
from then on, so the step a call stops at is exact. The last tests build the adapters through
the composition root and give them up through a real request scope.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from adapters.bootstrap import build_models
from adapters.fs.deadline import request_deadline
from adapters.models.http_json import JsonHttpClient
from adapters.models.idle import WAIT_CHECK_S
from adapters.models.llama import (
    LlamaEmbedder,
    LlamaQueryExpander,
    LlamaReranker,
)
from adapters.models.references import PREPARED_EMBED_FILE, PREPARED_GENERATE_FILE
from adapters.models.remote import RemoteEndpoint, RemoteReranker
from domain.errors import MODEL_UNAVAILABLE, QmdError
from domain.ports import WorkCancelledError
from tests.fakes import InMemoryStore
from tests.model_fakes import prepared_model

QUERY = "how long do cats sleep"
DOCS = [
    "Cats sleep for twelve to sixteen hours a day.",
    "Quarterly tax filings are due in April.",
    "Kittens and old cats sleep the most.",
    "The pipeline builds images and rolls them out.",
    "Lions rest for up to twenty hours a day.",
]
CLOSED_PORT = "http://127.0.0.1:9/v1"  # discard: nothing listens there


class GiveUpAfter:
    """A stop check: the first `passes` calls return, every later one raises."""

    def __init__(self, passes: int) -> None:
        self.passes = passes
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls > self.passes:
            raise WorkCancelledError("the request was given up")


# ---------------------------------------------------------------------------- llama.cpp


@pytest.mark.models
def test_a_rerank_stops_between_documents_and_keeps_only_what_it_finished() -> None:
    cache = InMemoryStore()
    # one check as it takes the model, then one per document: the third document is not scored
    reranker = LlamaReranker(
        str(prepared_model(PREPARED_GENERATE_FILE)),
        context_size=1024,
        cache=cache,
        stop_check=GiveUpAfter(3),
    )
    try:
        with pytest.raises(WorkCancelledError):
            reranker.rerank(QUERY, DOCS)
        scored = [cache.get(reranker.cache_key(QUERY, d)) for d in DOCS]
        assert [s is not None for s in scored] == [True, True, False, False, False]
    finally:
        reranker.close()


@pytest.mark.models
def test_a_rerank_nobody_gave_up_scores_every_document() -> None:
    cache = InMemoryStore()
    reranker = LlamaReranker(
        str(prepared_model(PREPARED_GENERATE_FILE)), context_size=1024, cache=cache
    )
    try:
        assert len(reranker.rerank(QUERY, DOCS)) == len(DOCS)
        assert all(cache.get(reranker.cache_key(QUERY, d)) for d in DOCS)
    finally:
        reranker.close()


@pytest.mark.models
def test_an_expansion_stops_after_the_token_it_was_given_up_at_and_is_not_cached() -> None:
    model = str(prepared_model(PREPARED_GENERATE_FILE))
    counting = GiveUpAfter(10_000)
    whole = LlamaQueryExpander(model, context_size=512, max_tokens=24, stop_check=counting)
    try:
        whole.generate(QUERY)
    finally:
        whole.close()
    # the model's own run asks once as it takes the model and about once per token
    assert counting.calls > 8, "the comparison needs a generation longer than the cut"

    cache = InMemoryStore()
    cut = GiveUpAfter(4)  # the model taken, then three tokens
    expander = LlamaQueryExpander(
        model, context_size=512, max_tokens=24, cache=cache, stop_check=cut
    )
    try:
        with pytest.raises(WorkCancelledError):
            expander.expand(QUERY)
        # the check before the token it was given up at (one spare for the lock's wait)
        assert cut.calls <= cut.passes + 2
        assert cache.get(expander.cache_key(QUERY)) is None
    finally:
        expander.close()


@pytest.mark.models
def test_an_embedding_stops_between_batches() -> None:
    texts = [f"note number {n} about cats" for n in range(6)]
    model = str(prepared_model(PREPARED_EMBED_FILE))
    counting = GiveUpAfter(10_000)
    whole = LlamaEmbedder(model, batch_size=2, stop_check=counting)
    try:
        assert len(whole.embed_queries(texts)) == 6
    finally:
        whole.close()
    assert counting.calls == 1 + 3  # taking the model, then each of the three batches

    cut = LlamaEmbedder(model, batch_size=2, stop_check=GiveUpAfter(2))
    try:
        with pytest.raises(WorkCancelledError):
            cut.embed_queries(texts)
    finally:
        cut.close()


@pytest.mark.models
def test_a_call_given_up_before_it_starts_loads_no_model() -> None:
    embedder = LlamaEmbedder(str(prepared_model(PREPARED_EMBED_FILE)), stop_check=GiveUpAfter(0))
    with pytest.raises(WorkCancelledError):
        embedder.embed_queries(["cats"])
    assert not embedder.resident.loaded


def test_a_call_waiting_for_a_busy_model_leaves_the_queue_once_given_up() -> None:
    """No model file is needed: the wait comes before the model is loaded."""
    given_up = threading.Event()

    def stop_check() -> None:
        if given_up.is_set():
            raise WorkCancelledError("the request was given up")

    reranker = LlamaReranker("/nonexistent/rerank.gguf", stop_check=stop_check)
    outcome: list[BaseException] = []
    ended = threading.Event()

    def call() -> None:
        try:
            reranker.rerank(QUERY, DOCS[:1])
        except BaseException as error:  # handed to the test's thread
            outcome.append(error)
        finally:
            ended.set()

    with reranker.resident.lock:  # another call is using the model
        waiter = threading.Thread(target=call)
        waiter.start()
        assert not ended.wait(4 * WAIT_CHECK_S), "it must wait while the model is in use"
        given_up.set()
        started = time.monotonic()
        assert ended.wait(5), "a call given up while waiting must leave the queue"
        left_after = time.monotonic() - started
    waiter.join()
    assert len(outcome) == 1 and isinstance(outcome[0], WorkCancelledError)
    assert left_after < 1.0


# ---------------------------------------------------------------------------- remote


def test_a_remote_call_given_up_makes_no_request() -> None:
    reranker = RemoteReranker(f"openai:chat-model@{CLOSED_PORT}", env={}, stop_check=GiveUpAfter(0))
    try:
        with pytest.raises(WorkCancelledError):
            reranker.rerank(QUERY, DOCS)
    finally:
        reranker.close()


def _closed_port_client(stop_check: GiveUpAfter) -> JsonHttpClient:
    return JsonHttpClient(
        CLOSED_PORT,
        describe=lambda reason: QmdError(MODEL_UNAVAILABLE, reason),
        max_attempts=4,
        timeout=2.0,
        sleep=lambda _seconds: None,
        stop_check=stop_check,
    )


def test_a_remote_call_given_up_between_retries_stops_retrying() -> None:
    patient = GiveUpAfter(10_000)
    waits: list[float] = []
    client = _closed_port_client(patient)
    client.sleep = waits.append
    with pytest.raises(QmdError) as failed:
        client.post("/embeddings", {"input": ["x"]})
    assert failed.value.code == MODEL_UNAVAILABLE
    # every attempt asks first, and so does every step of the waits between them
    assert patient.calls == 4 + len(waits)
    assert sum(waits) == pytest.approx(0.5 + 1.0 + 2.0)
    assert max(waits) <= WAIT_CHECK_S

    cut = GiveUpAfter(1)  # the first attempt fails to connect; the retry is given up
    with pytest.raises(WorkCancelledError):
        _closed_port_client(cut).post("/embeddings", {"input": ["x"]})
    assert cut.calls == 2


class _AlwaysBusy(BaseHTTPRequestHandler):
    """Every request: 429, come back in 20 s (within the client's 30 s timeout)."""

    def do_GET(self) -> None:
        self.send_response(429)
        self.send_header("Retry-After", "20")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self.do_GET()

    def log_message(self, *_args: object) -> None:
        pass


def test_a_remote_call_given_up_while_it_waits_to_retry_stops_waiting(tmp_path: Path) -> None:
    """A Retry-After wait is no step that runs to its end: a call given up during it leaves
    within the stop check's period instead of holding its model-lane thread for the rest of
    the wait. The reranker is built by the composition root and given up through a real
    request scope."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AlwaysBusy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = tmp_path / "index.yml"
    port = server.server_address[1]
    config.write_text(
        f"collections: {{}}\nmodels:\n  rerank: openai:m@http://127.0.0.1:{port}/v1?timeout=30\n",
        encoding="utf-8",
    )
    reranker = build_models(str(config), {"QMD_GENERATE_MODEL": "none"}).reranker
    assert reranker is not None
    given_up = threading.Event()
    timer = threading.Timer(0.3, given_up.set)
    try:
        timer.start()
        started = time.monotonic()
        with request_deadline(None, given_up), pytest.raises(WorkCancelledError):
            reranker.rerank(QUERY, DOCS)
        assert time.monotonic() - started < 2.0, "it waited out the Retry-After"
    finally:
        timer.cancel()
        server.shutdown()
        server.server_close()


def test_remote_requests_in_parallel_see_the_request_they_serve() -> None:
    """`map` runs items on pool threads; each must see its caller's context, where the
    request scope (and so whether it was given up) lives."""
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="none")
    endpoint = RemoteEndpoint(f"openai:m@{CLOSED_PORT}?concurrency=4", "embed", {})
    try:
        marker.set("the caller's")
        seen = endpoint.map(lambda _item: marker.get(), list(range(8)))
    finally:
        endpoint.close()
    assert seen == ["the caller's"] * 8


# ---------------------------------------------------------------------------- wiring


def _missing_models_config(folder: Path) -> str:
    path = folder / "index.yml"
    path.write_text(
        "collections: {}\nmodels:\n"
        f"  embed: {folder / 'missing-embed.gguf'}\n"
        f"  rerank: {folder / 'missing-rerank.gguf'}\n"
        f"  generate: {folder / 'missing-generate.gguf'}\n",
        encoding="utf-8",
    )
    return str(path)


@pytest.mark.models  # the llama.cpp adapters are built only where llama_cpp imports
def test_the_composition_root_gives_every_model_the_served_requests_stop_check(
    tmp_path: Path,
) -> None:
    """The model files do not exist: a call that got past its stop check would fail with
    `model-unavailable`, so `WorkCancelledError` shows the check came first."""
    models = build_models(_missing_models_config(tmp_path), {})
    embedder, reranker, expander = models.embedder, models.reranker, models.expander
    assert embedder is not None and reranker is not None and expander is not None
    calls: dict[str, Callable[[], object]] = {
        "embed": lambda: embedder.embed_queries([QUERY]),
        "rerank": lambda: reranker.rerank(QUERY, DOCS),
        "expand": lambda: expander.expand(QUERY),
    }
    given_up = threading.Event()
    given_up.set()
    for role, call in calls.items():
        with request_deadline(None, given_up), pytest.raises(WorkCancelledError):
            call()
        # outside any request (the CLI) nothing is given up: the call reaches the model
        with pytest.raises(QmdError) as missing:
            call()
        assert missing.value.code == MODEL_UNAVAILABLE, role
