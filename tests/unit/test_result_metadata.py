"""A search result brings the metadata its lexical hit carried (REQ-FILTER-006), through every
mode's legs, the any-term fill and fusion; a result only a vector leg found has none read, and
the surfaces read those by id, in one call, made only when one lacks it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adapters.bootstrap import App, Models
from adapters.mcp.formatting import results_metadata
from domain.filters import MetaValue
from domain.model import SubQuery
from domain.profiles import SEED_000
from domain.text import content_hash
from domain.usecases.embedding import EmbedIndex
from domain.usecases.search import SearchRequest
from tests.fakes import FixedClock, InMemoryStore, app_over
from tests.model_fakes import FakeEmbedder

T0 = "2025-01-01T00:00:00.000Z"
NOTES = {
    "auth.md": "# Authentication\n\nTokens expire after one hour; refresh tokens rotate.",
    "deploy.md": "# Deploying\n\nThe deploy pipeline builds images and rolls them out.",
    "tokens.md": "# Token basics\n\nAccess tokens are signed; refresh tokens are stored hashed.",
}
TAGS: dict[str, dict[str, MetaValue]] = {
    "auth.md": {"tags": ("security",)},
    "deploy.md": {"tags": ("ops",)},
}


def _app() -> tuple[App, dict[str, int]]:
    store = InMemoryStore()
    ids = {}
    for path, body in NOTES.items():
        store.upsert_document("notes", path, path, content_hash(body), body, T0, T0)
        meta = store.document_by_path("notes", path)
        assert meta is not None
        ids[path] = meta.id
    for path, metadata in TAGS.items():
        store.put_metadata("notes", path, metadata)
    EmbedIndex(store, store, FakeEmbedder(), FixedClock()).run()
    return app_over(store, Models(embedder=FakeEmbedder())), ids


def test_lexical_results_carry_their_hits_metadata() -> None:
    app, _ids = _app()
    found = app.searcher.lex_search("tokens", SearchRequest(limit=5))
    assert {r.document.meta.path: r.metadata for r in found} == {
        "auth.md": {"tags": ("security",)},
        "tokens.md": {},
    }
    # the default surface's any-term fill: the partial results carry it too
    filled = app.searcher.with_profile(SEED_000).lex_search("tokens pipeline", SearchRequest())
    assert {r.document.meta.path: (r.partial, r.metadata) for r in filled} == {
        "auth.md": (True, {"tags": ("security",)}),
        "tokens.md": (True, {}),
        "deploy.md": (True, {"tags": ("ops",)}),
    }


def test_fused_results_carry_what_a_lexical_leg_read_and_vector_only_ones_none() -> None:
    app, _ids = _app()
    searches = [SubQuery("lex", "pipeline"), SubQuery("vec", "signed access")]
    results = app.searcher.structured_query(searches, SearchRequest(limit=5))
    by_path = {r.document.meta.path: r.metadata for r in results}
    assert by_path["deploy.md"] == {"tags": ("ops",)}  # the lex leg found it
    assert by_path["tokens.md"] is None  # only a vector leg did: not read
    hybrid = app.searcher.hybrid_query("deploy pipeline", SearchRequest(limit=5, rerank=False))
    assert {r.document.meta.path: r.metadata for r in hybrid}["deploy.md"] == {"tags": ("ops",)}


def test_the_surface_reads_by_id_only_what_the_results_lack() -> None:
    app, ids = _app()
    asked: list[list[int]] = []
    store = app.store
    assert isinstance(store, InMemoryStore)

    def by_id(wanted: Sequence[int]) -> Mapping[int, Mapping[str, MetaValue]]:
        asked.append(list(wanted))
        return store.metadata_by_id(wanted)

    lexical = app.searcher.lex_search("tokens", SearchRequest(limit=5))
    assert results_metadata(lexical, by_id) == {
        ids["auth.md"]: {"tags": ("security",)},
        ids["tokens.md"]: {},
    }
    assert asked == []  # every result brought its own
    vector = app.searcher.vector_search("deploy images", SearchRequest(limit=2))
    shown = results_metadata(vector, by_id)
    assert asked == [[r.document.meta.id for r in vector]]
    assert shown == {
        r.document.meta.id: TAGS[r.document.meta.path]
        for r in vector
        if r.document.meta.path in TAGS
    }
