"""projmem's deep-search report over fakes wired like the composition root wires them: seed
002's eight stages with counts, a reranker that cannot be had reported as skipped (not as
applied), and each result named by the chunk its snippet comes from (REQ-PROJMEM-DEEP-001,
REQ-PROJMEM-DEEP-004)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from adapters.bootstrap import App, Models, ProjmemAdapters
from adapters.mcp.registry import SurfaceContext, create_surface
from adapters.mcp.tools import NO_CLIENT
from adapters.models.references import DEFAULT_MODELS, ModelResolver
from domain.errors import MODEL_UNAVAILABLE, QmdError
from domain.model import Collection, SubQuery
from domain.profiles import SEED_000
from domain.text import content_hash
from domain.usecases.chunks import ChunkKeeper
from domain.usecases.embedding import EmbedIndex
from domain.usecases.projmem import PIPELINE, ChunkSearch, DeepOptions
from tests.fakes import (
    FakeContentSource,
    FixedClock,
    InMemoryChunkIndex,
    InMemoryConfigRepository,
    InMemorySessions,
    InMemoryStore,
    app_over,
)
from tests.guarantees import MemoryNotes
from tests.model_fakes import FakeEmbedder, FakeExpander, FakeReranker

T0 = "2025-01-01T00:00:00.000Z"
NOTES = {
    "auth.md": "---\ntitle: Auth\nsource_kind: code_note\n---\n\n# Auth\n\nHow callers sign in.\n\n"
    "## Tokens\n\nRefresh tokens rotate on every use and expire after thirty days.\n",
    "deploy.md": "# Deploying\n\nThe pipeline builds images and rolls them out.\n",
}


class UnavailableReranker(FakeReranker):
    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        raise QmdError(MODEL_UNAVAILABLE, "the rerank model could not be loaded")


def _search(reranker: FakeReranker | None) -> ChunkSearch:
    store = InMemoryStore()
    for path, body in NOTES.items():
        store.upsert_document("notes", path, path, content_hash(body), body, T0, T0)
    store.put_collection(Collection(name="notes", path="/notes"))
    embedder = FakeEmbedder()
    EmbedIndex(store, store, embedder, FixedClock()).run()
    chunks = InMemoryChunkIndex(store)
    ChunkKeeper(store, chunks).sync()
    app = app_over(store, Models(embedder=embedder, reranker=reranker, expander=FakeExpander()))
    return ChunkSearch(store, app.searcher, chunks, chunks, time.perf_counter).with_profile(
        SEED_000
    )


def test_every_stage_is_reported_with_counts_and_expansions_once() -> None:
    report = _search(FakeReranker()).deep_search("sign in", 5, None, DeepOptions())
    assert [s.name for s in report.stages] == list(PIPELINE)
    by_name = {s.name: s for s in report.stages}
    assert not any(s.skipped for s in report.stages), report.stages
    assert by_name["bm25_search"].count_in >= 1
    assert by_name["query_expansion"].count_out == len(report.expanded)
    assert len(report.expanded) == len(set(report.expanded))
    assert by_name["query_embedding"].count_in == by_name["query_embedding"].count_out >= 1
    assert by_name["blending"].count_out == len(report.hits)
    assert report.reranked is True


def test_a_reranker_that_cannot_be_had_is_skipped_with_its_reason_not_applied() -> None:
    report = _search(UnavailableReranker()).deep_search("sign in", 5, None, DeepOptions())
    reranking = {s.name: s for s in report.stages}["reranking"]
    # the error's own words are for the log; the note names the model and where to look
    assert reranking.skipped
    assert reranking.note == "no rerank model is available; 'qmd doctor' says why"
    assert report.reranked is False
    assert all(hit.reranker_score is None for hit in report.hits)


def test_a_result_names_the_chunk_its_snippet_comes_from() -> None:
    report = _search(None).deep_search("refresh tokens rotate", 5, None, DeepOptions())
    hit = report.hits[0]
    assert hit.path == "auth.md" and hit.chunk is not None
    assert hit.chunk.heading_path == "Auth > Tokens"
    assert "Refresh tokens rotate" in hit.chunk.text and "Refresh tokens rotate" in hit.preview


class MissingExpander(FakeExpander):
    """The default query-expansion model as a new user has it: not in the model cache, and
    no download allowed. The error is the real resolver's, cache folder and all."""

    def __init__(self, cache: Path) -> None:
        super().__init__()
        self.cache = cache

    def expand(self, query: str) -> list[SubQuery]:
        resolver = ModelResolver(self.cache, allow_download=False)
        resolver.resolve(DEFAULT_MODELS["generate"], "generate")
        raise AssertionError("the model cannot be in an empty cache")


def test_an_expansion_model_that_cannot_be_had_is_skipped_briefly_not_run(
    tmp_path: Path,
) -> None:
    """REQ-PROJMEM-DEEP-002, REQ-SEARCH-DEGRADE-002: through the surface, the report says
    query_expansion was skipped and why in a short line naming no folder, never `in 1, out 0`;
    the result's warnings say the same."""
    store = InMemoryStore()
    for path, body in NOTES.items():
        store.upsert_document("notes", path, path, content_hash(body), body, T0, T0)
    store.put_collection(Collection(name="notes", path="/notes"))
    embedder = FakeEmbedder()
    EmbedIndex(store, store, embedder, FixedClock()).run()
    chunks = InMemoryChunkIndex(store)
    ChunkKeeper(store, chunks).sync()
    cache = tmp_path / "model-cache"
    app = App(
        store=store,
        lexical=store,
        vectors=store,
        cache=store,
        config=InMemoryConfigRepository([Collection("notes", "/notes")]),
        source=FakeContentSource({}),
        clock=FixedClock(),
        models=Models(embedder=embedder, expander=MissingExpander(cache)),
        maintenance=store,
        metadata_index=store,
        projmem=ProjmemAdapters(chunks, chunks, InMemorySessions(), chunks, MemoryNotes()),
    )
    surface = create_surface("projmem", app.services(), SurfaceContext("test"))
    answer = surface.call_tool("projmem_deep_search", {"query": "how callers sign in"}, NO_CLIENT)
    text = answer["content"][0]["text"]
    stages = {s["name"]: s for s in answer["structuredContent"]["stages"]}
    expansion = stages["query_expansion"]
    assert expansion["skipped"] is True and "in" not in expansion, expansion
    why = (
        "no query-expansion model is available (not downloaded, and it cannot be downloaded "
        "now); 'qmd doctor' says how to get it"
    )
    assert expansion["why"] == why
    assert f"  query_expansion: skipped: {why}\n" in text
    warnings = answer["structuredContent"]["warnings"]
    assert warnings[0] == f"expansion skipped (the query was not expanded): {why}"
    assert str(tmp_path) not in text and "model-cache" not in json.dumps(answer)
