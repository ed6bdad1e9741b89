"""The LDIMS surface over fakes: extraction states, backend failures, the filter mapping, the
time limit and relevance (REQ-LDIMS-RES-003, REQ-LDIMS-RES-004, REQ-LDIMS-ERR-004,
REQ-LDIMS-TOOL-003, REQ-LDIMS-ERR-003, REQ-LDIMS-TOOL-006)."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from typing import Any

import pytest

from adapters.bootstrap import Models
from adapters.mcp.ldims import LdimsSurface
from adapters.mcp.tools import NO_CLIENT
from domain.errors import UNAVAILABLE, QmdError
from domain.extraction import ExtractionState
from domain.model import Collection
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
        result = surface.call_tool(
            "searchDocuments", {"query": "alpha", "filters": filters}, NO_CLIENT
        )
        return [r["documentId"] for r in _text(result)["results"]]

    assert sorted(ids({})) == ["c/a.md", "c/b.pdf"]
    assert ids({"documentType": "PDF"}) == ["c/b.pdf"]
    assert ids({"submitter": "Ana"}) == ["c/b.pdf"]
    assert ids({"dateFrom": "2024-01-01"}) == ["c/a.md"]  # b's date is its `created`
    assert ids({"dateTo": "2023-01-01"}) == ["c/b.pdf"]
    result = surface.call_tool(
        "searchDocuments", {"query": "alpha", "filters": {"searchMode": "exact"}}, NO_CLIENT
    )
    by_id = {r["documentId"]: r["metadata"] for r in _text(result)["results"]}
    assert by_id["c/b.pdf"] == {
        "createdAt": "2023-01-01T00:00:00Z",
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
    result = surface.call_tool("searchDocuments", {"query": "alpha"}, NO_CLIENT)
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
    result = surface.call_tool("searchDocuments", {"query": "refresh tokens"}, NO_CLIENT)
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
    late = surface.call_tool("searchDocuments", {"query": "refresh tokens"}, NO_CLIENT)
    assert _text(late)["errorCode"] == "SEARCH_TIMEOUT" and time.monotonic() - began < 1.0
    time.sleep(0.8)  # its model call has ended
    found = _text(surface.call_tool("searchDocuments", {"query": "refresh tokens"}, NO_CLIENT))
    assert [r["documentId"] for r in found["results"]][:1] == ["c/tokens.md"]
    assert reranker.calls == 1  # only the search answered reranked: the other one stopped


def test_semantic_scores_mean_relevance_and_nothing_relevant_is_no_results() -> None:
    """REQ-LDIMS-TOOL-006 over the fake embedder (the real model: tests/e2e/test_ldims_e2e.py)."""
    surface = LdimsSurface(_semantic_services(), timeout_s=30)
    found = _text(surface.call_tool("searchDocuments", {"query": "refresh tokens"}, NO_CLIENT))
    assert found["searchMetadata"].get("effectiveSearchMode") is None  # vectors were used
    assert found["results"][0]["documentId"] == "c/tokens.md"
    scores = [r["relevanceScore"] for r in found["results"]]
    assert all(0 < s <= 1 for s in scores)
    assert scores[:3] != [1.0, 0.5, 0.333]  # not places in the fused list
    nothing = surface.call_tool(
        "searchDocuments", {"query": "zxqv blorptastic flumwhistle"}, NO_CLIENT
    )
    assert "isError" not in nothing
    assert _text(nothing)["results"] == [] and _text(nothing)["totalMatches"] == 0


def test_created_at_has_the_seeds_one_format_whatever_the_source() -> None:
    """REQ-LDIMS-TOOL-001: front matter's bare day, an extractor's zoneless time, a time with
    an offset and the file's own `.000Z` time all read `2023-12-01T10:00:00Z` (UTC, to the
    second); a `date` that is no ISO date gives way to the next date the document has."""
    store = InMemoryStore()
    dates: dict[str, dict[str, object]] = {
        "day.md": {"date": "2024-05-01"},
        "office.docx": {"created": "2023-01-01T10:30:00"},
        "offset.md": {"date": "2024-05-01T12:00:00+02:00"},
        "file.txt": {},
        "vague.md": {"date": "spring 2024", "created": "2022-02-02"},
    }
    for path, meta in dates.items():
        body = f"ledger {path}"
        store.upsert_document("c", path, path, content_hash(body), body, T0, T0)
        store.put_metadata("c", path, {"modified": T0, **meta})
    store.put_collection(Collection(name="c", path="/c"))
    surface = LdimsSurface(app_over(store).services())
    result = surface.call_tool(
        "searchDocuments",
        {"query": "ledger", "maxResults": 10, "filters": {"searchMode": "exact"}},
        NO_CLIENT,
    )
    created = {r["documentId"]: r["metadata"]["createdAt"] for r in _text(result)["results"]}
    assert created == {
        "c/day.md": "2024-05-01T00:00:00Z",
        "c/office.docx": "2023-01-01T10:30:00Z",
        "c/offset.md": "2024-05-01T10:00:00Z",
        "c/file.txt": "2025-01-01T00:00:00Z",
        "c/vague.md": "2022-02-02T00:00:00Z",
    }


class PlacedEmbedder(FakeEmbedder):
    """Every query lies on one axis; a document whose text holds a key of `near` lies at that
    cosine similarity from it (0 otherwise): similarities chosen, not hashed."""

    def __init__(self, near: dict[str, float]) -> None:
        super().__init__(dimensions=8)
        self.near = near

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * 7 for _ in texts]

    def embed_documents(self, items: Sequence[tuple[str, str]]) -> list[list[float]]:
        vectors = []
        for _title, text in items:
            s = next((v for key, v in self.near.items() if key in text), 0.0)
            vectors.append([s, math.sqrt(1 - s * s)] + [0.0] * 6)
        return vectors


# body, and the cosine similarity of its one chunk to any query
PLACED = {
    "figures.pdf": ("Table 7 12 44 91 figure appendix", 0.41),  # near everything, as noise is
    "plan.md": ("Quarterly plan for growth and hiring", 0.40),
    "report.md": ("Alpha report on quarterly numbers", 0.20),
    "essay.md": ("Musings about nothing in particular", 0.62),
}


def _placed_surface() -> LdimsSurface:
    store = InMemoryStore()
    for path, (body, _near) in PLACED.items():
        store.upsert_document("c", path, path, content_hash(body), body, T0, T0)
    store.put_collection(Collection(name="c", path="/c"))
    embedder = PlacedEmbedder(dict(PLACED.values()))
    EmbedIndex(store, store, embedder, FixedClock()).run()
    return LdimsSurface(app_over(store, Models(embedder=embedder)).services(), timeout_s=30)


def _found(surface: LdimsSurface, query: str) -> list[tuple[str, float]]:
    answer = _text(surface.call_tool("searchDocuments", {"query": query}, NO_CLIENT))
    assert answer["searchMetadata"].get("effectiveSearchMode") is None  # vectors were used
    return [(r["documentId"], r["relevanceScore"]) for r in answer["results"]]


def test_results_come_most_relevant_first() -> None:
    """REQ-LDIMS-TOOL-006: relevanceScore never rises down the list, whatever order the fused
    search had them in."""
    found = _found(_placed_surface(), "quarterly report")
    scores = [score for _id, score in found]
    assert len(found) >= 3 and scores == sorted(scores, reverse=True), found


def test_a_document_sharing_no_word_needs_a_clearly_higher_similarity() -> None:
    """REQ-LDIMS-TOOL-006: a gibberish query finds nothing at the floor's similarity (the
    noisy PDF at 0.41 is not a match), only a document at the floor plus the margin; a
    document sharing one of the query's words with it needs the floor alone."""
    surface = _placed_surface()
    assert _found(surface, "zxqv blorptastic flumwhistle") == [("c/essay.md", 0.62)]
    # "the" is a function word: it is not a word shared with the query
    assert dict(_found(surface, "the zxqv quarterly")) == {"c/essay.md": 0.62, "c/plan.md": 0.4}
    assert "c/figures.pdf" not in dict(_found(surface, "the zxqv"))
    # words written without spaces are not told apart: the floor alone applies
    assert "c/figures.pdf" in dict(_found(surface, "季度销售策略"))
