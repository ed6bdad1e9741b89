"""Query expansion with the real generator, Qwen2.5-Coder-1.5B-Instruct Q4_K_M (the real model
set, `scripts/prepare_models.py --set real`): what it writes for a query is searched once per
distinct expansion and at most three of each kind (REQ-SEARCH-EXPAND-DISTINCT-001), and under
a request time limit shorter than its generation the search answers in time without it
(REQ-SEARCH-EXPAND-TIME-001), the generation left behind stopping at its next token.

The index and the embedder are fakes (the generator is what is under test); the expander is
the production adapter on the real GGUF, handed the request's stop check as the composition
root hands it. Each test prints its timings (run with `-s` to see them)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from adapters.bootstrap import App, Models
from adapters.fs.deadline import RequestTimeBudget, request_deadline, wait_stages_ended
from adapters.models.llama import LlamaQueryExpander
from domain.expansions import distinct_expansions
from domain.model import Collection
from domain.profiles import EXPANSIONS_PER_KIND, SEED_000
from domain.text import content_hash
from domain.usecases.embedding import EmbedIndex
from domain.usecases.search import SearchRequest
from domain.usecases.trace import SearchTrace
from tests.fakes import FixedClock, InMemoryStore, app_over
from tests.model_fakes import FakeEmbedder, FakeReranker, real_prepared_model

pytestmark = [pytest.mark.models, pytest.mark.slow, pytest.mark.real_models]

T0 = "2025-01-01T00:00:00.000Z"
NOTES = {
    "packaging.md": "# Packaging\n\nBuild a wheel with `python -m build`; upload it with twine.\n",
    "limits.md": "# Rate limits\n\nEach client key may make 600 calls per minute.\n",
    "deploy.md": "# Deploying\n\nThe pipeline builds images and signs them in CI.\n",
}
# no keyword of the notes (no strong signal): the search expands it
QUERY = "how do I publish my python library"


@pytest.fixture(scope="module")
def expander() -> Iterator[LlamaQueryExpander]:
    threads = max(1, min(2, os.cpu_count() or 1))
    adapter = LlamaQueryExpander(
        str(real_prepared_model("generate")),
        force_cpu=True,
        n_threads=threads,
        # the search reuses what the first test generated; what a stopped call generated is
        # never stored (REQ-SEARCH-CANCEL-MODEL-001)
        cache=InMemoryStore(),
        stop_check=RequestTimeBudget().check,
    )
    yield adapter
    wait_stages_ended(120)  # a generation left behind stops at its next token
    adapter.close()


def _app(expander: LlamaQueryExpander) -> App:
    store = InMemoryStore()
    store.put_collection(Collection(name="notes", path="/notes"))
    for path, body in NOTES.items():
        store.upsert_document("notes", path, path, content_hash(body), body, T0, T0)
    embedder = FakeEmbedder()
    EmbedIndex(store, store, embedder, FixedClock()).run()
    return app_over(store, Models(embedder=embedder, reranker=FakeReranker(), expander=expander))


def test_the_real_generator_is_searched_once_per_distinct_expansion(
    expander: LlamaQueryExpander,
) -> None:
    began = time.monotonic()
    written = expander.expand(QUERY)  # not in the cache yet: the model generates
    generated = time.monotonic() - began
    searcher = _app(expander).searcher.with_profile(SEED_000)
    trace = SearchTrace()
    began = time.monotonic()
    results = searcher.hybrid_query(QUERY, SearchRequest(trace=trace, rerank=False))
    searched = time.monotonic() - began
    distinct = distinct_expansions(QUERY, written, EXPANSIONS_PER_KIND)
    print(
        f"\nreal expansion: {generated:.1f} s to generate {len(written)} lines, "
        f"{len(distinct)} distinct searched; the search (expansion cached) took "
        f"{searched:.1f} s; "
        f"load {os.getloadavg()[0]:.2f}"
    )
    for sub in written:
        print(f"  {sub.type}: {sub.query}")
    assert written and results
    assert trace.expansions == [(s.type, s.query) for s in distinct]
    for kind in ("lex", "vec", "hyde"):
        assert sum(1 for t, _q in trace.expansions if t == kind) <= EXPANSIONS_PER_KIND
    assert len(set(trace.expansions)) == len(trace.expansions)
    steps = trace.steps
    semantic = sum(1 for t, _q in trace.expansions if t != "lex")
    assert steps["query_embedding"].count_in == 1 + semantic
    assert steps["bm25_search"].count_in == 1 + len(trace.expansions) - semantic


def test_a_short_time_limit_skips_the_real_generation(expander: LlamaQueryExpander) -> None:
    searcher = _app(expander).searcher.with_profile(SEED_000)
    trace = SearchTrace()
    limit_s = 3.0
    began = time.monotonic()
    with request_deadline(time.monotonic() + limit_s):
        results = searcher.hybrid_query(
            "what does the build pipeline sign", SearchRequest(trace=trace)
        )
    took = time.monotonic() - began
    left_behind = time.monotonic()
    assert wait_stages_ended(120), "the generation left behind did not stop"
    stopped = time.monotonic() - left_behind
    print(
        f"\nreal expansion under a {limit_s:.0f} s limit: answered in {took:.2f} s, "
        f"the generation left behind stopped {stopped:.2f} s later; "
        f"load {os.getloadavg()[0]:.2f}"
    )
    assert took < limit_s and results
    reasons = {d.stage: d.reason for d in trace.degradations}
    assert "time limit" in reasons["expansion"], reasons
    assert trace.expansions == []
