"""The LDIMS surface over fakes: extraction states, backend failures, the filter mapping, the
time limit and relevance (REQ-LDIMS-RES-003, REQ-LDIMS-RES-004, REQ-LDIMS-ERR-004,
REQ-LDIMS-TOOL-003, REQ-LDIMS-ERR-003, REQ-LDIMS-TOOL-006)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest

from adapters.bootstrap import Models
from adapters.mcp.ldims import LdimsSurface
from domain.errors import UNAVAILABLE, QmdError
from domain.extraction import ExtractionState
from domain.text import content_hash
from domain.usecases.embedding import EmbedIndex
from domain.usecases.services import Services
from tests.fakes import FixedClock, InMemoryStore, app_over
from tests.model_fakes import FakeEmbedder, FakeReranker

T0 = "2025-01-01T00:00:00.000Z"


def _services() -> Services:
    store = InMemoryStore()
    for path, body, meta in [
        ("a.md", "alpha report", {"format": "md", "modified": "2024-05-01T00:00:00.000Z"}),
        ("b.pdf", "alpha slides", {"format": "pdf", "created": "2023-01-01", "author": "Ana"}),
    ]:
        store.upsert_document(
            "c", path, path, hashlib.sha256(body.encode()).hexdigest(), body, T0, T0
        )
        store.put_metadata("c", path, meta)
    from domain.model import Collection

    store.put_collection(Collection(name="c", path="/c"))
    return app_over(store).services()


class States:
    def __init__(self, states: dict[str, ExtractionState]) -> None:
        self.states = states

    def recorded_state(self, collection: str, path: str) -> ExtractionState | None:
        return self.states.get(f"{collection}/{path}")


def _text(result: dict[str, Any]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(result["content"][0]["text"])
    return parsed


def test_extraction_states_answer_processing_and_failed() -> None:
    surface = LdimsSurface(
        _services(),
        States(
            {
                "c/new.pdf": ExtractionState("c", "new.pdf", "pending"),
                "c/gone.pdf": ExtractionState(
                    "c", "gone.pdf", "failed", "no-text-layer", "no page has a text layer"
                ),
                # indexed: its text is served whatever an older record says
                "c/b.pdf": ExtractionState("c", "b.pdf", "failed", "corrupt"),
            }
        ),
    )
    busy = surface.read_resource("ldims://docs/c%2Fnew.pdf/extracted_content")["contents"][0]
    assert json.loads(busy["text"]) == {
        "status": "processing",
        "message": "Content extraction is in progress. Please try again later.",
    }
    failed = surface.read_resource("ldims://docs/c%2Fgone.pdf/extracted_content")["contents"][0]
    assert json.loads(failed["text"])["errorCode"] == "CONTENT_UNAVAILABLE_OR_FAILED"
    assert json.loads(failed["text"])["errorDetails"] == {
        "code": "no-text-layer",
        "reason": "no-text-layer: no page has a text layer",
    }
    ok = surface.read_resource("ldims://docs/c/b.pdf/extracted_content")["contents"][0]
    assert ok["text"] == "alpha slides" and ok["metadata"]["format"] == "pdf"


def test_filters_map_to_metadata() -> None:
    surface = LdimsSurface(_services())

    def ids(filters: dict[str, Any]) -> list[str]:
        result = surface.call_tool("searchDocuments", {"query": "alpha", "filters": filters})
        return [r["documentId"] for r in _text(result)["results"]]

    assert sorted(ids({})) == ["c/a.md", "c/b.pdf"]
    assert ids({"documentType": "PDF"}) == ["c/b.pdf"]
    assert ids({"submitter": "Ana"}) == ["c/b.pdf"]
    assert ids({"dateFrom": "2024-01-01"}) == ["c/a.md"]  # b's date is its `created`
    assert ids({"dateTo": "2023-01-01"}) == ["c/b.pdf"]
    result = surface.call_tool(
        "searchDocuments", {"query": "alpha", "filters": {"searchMode": "exact"}}
    )
    by_id = {r["documentId"]: r["metadata"] for r in _text(result)["results"]}
    assert by_id["c/b.pdf"] == {
        "createdAt": "2023-01-01",
        "submitter": "Ana",
        "documentType": "pdf",
    }


class Broken:
    def __getattr__(self, name: str) -> Any:
        raise QmdError(UNAVAILABLE, "database is locked at /secret/path")


def test_backend_failures_are_backend_api_errors() -> None:
    services = _services()
    surface = LdimsSurface(services)
    surface._searcher = Broken()  # type: ignore[assignment]
    result = surface.call_tool("searchDocuments", {"query": "alpha"})
    assert result["isError"] is True
    body = _text(result)
    assert body["errorCode"] == "BACKEND_API_ERROR"
    assert body["errorDetails"] == {"code": "unavailable"}
    assert "secret" not in result["content"][0]["text"]


class SlowEmbedder(FakeEmbedder):
    """Query embedding takes `delay` seconds (one model step, which runs to its end): a
    search that outlives the time limit."""

    def __init__(self) -> None:
        super().__init__()
        self.delay = 0.0

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        time.sleep(self.delay)
        return super().embed_queries(texts)


class CountingReranker(FakeReranker):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls += 1
        return super().rerank(query, documents)


def _semantic_services(
    reranker: FakeReranker | None = None, embedder: FakeEmbedder | None = None
) -> Services:
    store = InMemoryStore()
    for path, body in {
        "tokens.md": "# Tokens\n\nRefresh tokens rotate on every use.",
        "deploy.md": "# Deploying\n\nThe pipeline builds images and rolls them out.",
        "cache.md": "# Caching\n\nResponses are cached for five minutes at the edge.",
    }.items():
        store.upsert_document("c", path, path, content_hash(body), body, T0, T0)
    from domain.model import Collection

    store.put_collection(Collection(name="c", path="/c"))
    embedder = embedder or FakeEmbedder()
    EmbedIndex(store, store, embedder, FixedClock()).run()
    return app_over(store, Models(embedder=embedder, reranker=reranker)).services()


@pytest.mark.slow  # waits on real time by design: left out of `make test-fast`
def test_a_slow_search_is_answered_search_timeout_at_the_limit_exactly() -> None:
    """REQ-LDIMS-ERR-003: at the configured time, not when the search ends; the search left
    behind stops once its model call ends (REQ-SEARCH-CANCEL-LDIMSCANCEL-001)."""
    embedder, reranker = SlowEmbedder(), CountingReranker()
    surface = LdimsSurface(_semantic_services(reranker, embedder), timeout_s=0.5)
    embedder.delay = 1.5
    began = time.monotonic()
    result = surface.call_tool("searchDocuments", {"query": "refresh tokens"})
    took = time.monotonic() - began
    assert _text(result) == {
        "isError": True,
        "errorCode": "SEARCH_TIMEOUT",
        "errorMessage": "The search operation timed out before results could be retrieved.",
        "errorDetails": {"timeoutSeconds": 0.5},
    }
    assert 0.5 <= took < 1.0, took
    # the search left behind still holds the connection until its model call ends: the next
    # one waits for it, within its own limit, and then runs
    embedder.delay = 0.0
    began = time.monotonic()
    late = surface.call_tool("searchDocuments", {"query": "refresh tokens"})
    assert _text(late)["errorCode"] == "SEARCH_TIMEOUT" and time.monotonic() - began < 1.0
    time.sleep(0.8)  # its model call has ended
    found = _text(surface.call_tool("searchDocuments", {"query": "refresh tokens"}))
    assert [r["documentId"] for r in found["results"]][:1] == ["c/tokens.md"]
    assert reranker.calls == 1  # only the search answered reranked: the other one stopped


def test_semantic_scores_mean_relevance_and_nothing_relevant_is_no_results() -> None:
    """REQ-LDIMS-TOOL-006 over the fake embedder (the real model: tests/e2e/test_ldims_e2e.py)."""
    surface = LdimsSurface(_semantic_services(), timeout_s=30)
    found = _text(surface.call_tool("searchDocuments", {"query": "refresh tokens"}))
    assert found["searchMetadata"].get("effectiveSearchMode") is None  # vectors were used
    assert found["results"][0]["documentId"] == "c/tokens.md"
    scores = [r["relevanceScore"] for r in found["results"]]
    assert all(0 < s <= 1 for s in scores)
    assert scores[:3] != [1.0, 0.5, 0.333]  # not places in the fused list
    nothing = surface.call_tool("searchDocuments", {"query": "zxqv blorptastic flumwhistle"})
    assert "isError" not in nothing
    assert _text(nothing)["results"] == [] and _text(nothing)["totalMatches"] == 0
