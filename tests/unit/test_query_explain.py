"""Score explanations of the fused modes, with fake models wired through the composition root.

The explanation must account for the score exactly: the contributions add up to the fusion
score candidates were ordered by, and the blend reproduces the final score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.bootstrap import App, Models
from domain.errors import MODEL_UNAVAILABLE, QmdError
from domain.fusion import RRF_K, reciprocal_rank_fusion, rrf_contributions, top_rank_bonus
from domain.model import ListContribution, ScoreExplanation, SearchResult, SubQuery
from domain.profiles import FUSION_BY_EMBEDDER, ORIGINAL_2_8_3, SEED_000
from domain.text import content_hash
from domain.usecases.embedding import EmbedIndex
from domain.usecases.search import Searcher, SearchModels, SearchRequest
from tests.fakes import FixedClock, InMemoryStore, app_over
from tests.model_fakes import FakeEmbedder, FakeExpander, FakeReranker

T0 = "2025-01-01T00:00:00.000Z"
NOTES = {
    "auth.md": "# Authentication\n\nTokens expire after one hour; refresh tokens rotate.",
    "deploy.md": "# Deploying\n\nThe deploy pipeline builds images and rolls them out.",
    "tokens.md": "# Token basics\n\nAccess tokens are signed; refresh tokens are stored hashed.",
    "cache.md": "# Caching\n\nResponses are cached for five minutes at the edge.",
}


def _app(
    *,
    reranker: bool = True,
    expander: bool = True,
    embedded: bool = True,
    embedder_name: str = "fake-embed",
) -> App:
    store = InMemoryStore()
    for path, body in NOTES.items():
        store.upsert_document("notes", path, path, content_hash(body), body, T0, T0)
    embedder = FakeEmbedder(model_name=embedder_name)
    if embedded:
        EmbedIndex(store, store, embedder, FixedClock()).run()
    models = Models(
        embedder=embedder,
        reranker=FakeReranker() if reranker else None,
        expander=FakeExpander() if expander else None,
    )
    return app_over(store, models)


def _explained(result: SearchResult) -> ScoreExplanation:
    assert result.explanation is not None
    return result.explanation


def _keyword_contributions(results: Sequence[SearchResult]) -> dict[str, ListContribution]:
    """Each result's keyword-list contribution, by path."""
    return {
        r.document.meta.path: c
        for r in results
        for c in _explained(r).contributions
        if c.source == "fts"
    }


def _check_accounts_for_score(result: SearchResult) -> None:
    explain = _explained(result)
    base = 0.0
    for contribution in explain.contributions:
        assert contribution.rrf_contribution == contribution.weight / (
            RRF_K + contribution.rank + contribution.rank_offset
        )
        base += contribution.rrf_contribution
    assert explain.rrf_base_score == base
    best = min(c.rank + c.rank_offset for c in explain.contributions)
    assert explain.top_rank_bonus == top_rank_bonus(best)
    assert explain.rrf_total_score == base + explain.top_rank_bonus
    assert explain.position_score == 1 / explain.rrf_rank
    expected = (
        explain.blend_weight * explain.position_score
        + (1 - explain.blend_weight) * explain.rerank_score
    )
    assert math.isclose(explain.blended_score, expected, rel_tol=1e-12)
    assert explain.blended_score == result.score


def test_hybrid_query_explains_every_leg_and_the_blend() -> None:
    app = _app()
    results = app.searcher.hybrid_query("refresh tokens", SearchRequest(limit=4, explain=True))
    assert results
    for result in results:
        _check_accounts_for_score(result)
    top = results[0].explanation
    assert top is not None
    kinds = {(c.source, c.query_type) for r in results for c in _explained(r).contributions}
    # the caller's text on both retrievers, plus the expander's lex, vec and hyde lines
    assert {("fts", "original"), ("vec", "original"), ("fts", "lex")} <= kinds
    assert {("vec", "vec"), ("vec", "hyde")} <= kinds
    originals = [
        c for r in results for c in _explained(r).contributions if c.query_type == "original"
    ]
    assert originals and all(c.weight == 2.0 and c.query == "refresh tokens" for c in originals)
    assert all(0 < s <= 1 for s in top.fts_scores)
    assert top.blend_weight == 0.75  # rank bands: 1-3 keep 75% of the position score
    # the BM25 list's backend score is the document's own normalised BM25 score
    bm25 = {
        r.document.meta.path: r.score
        for r in app.searcher.lex_search("refresh tokens", SearchRequest(limit=10))
    }
    probe = [c for c in top.contributions if (c.source, c.query_type) == ("fts", "original")]
    assert probe and probe[0].backend_score == bm25[results[0].document.meta.path]
    assert top.fts_scores == tuple(c.backend_score for c in top.contributions if c.source == "fts")


def test_rrf_ranks_are_the_fused_order_before_reranking() -> None:
    app = _app()
    results = app.searcher.hybrid_query("refresh tokens", SearchRequest(limit=4, explain=True))
    ranks = sorted(_explained(r).rrf_rank for r in results)
    assert ranks == list(range(1, len(results) + 1))
    totals = {_explained(r).rrf_rank: _explained(r).rrf_total_score for r in results}
    ordered = [totals[rank] for rank in sorted(totals)]
    assert ordered == sorted(ordered, reverse=True)


def test_without_a_reranker_the_score_is_the_position_score() -> None:
    app = _app(reranker=False)
    results = app.searcher.hybrid_query("deploy pipeline", SearchRequest(limit=3, explain=True))
    assert results
    for result in results:
        explain = result.explanation
        assert explain is not None
        assert (explain.blend_weight, explain.rerank_score) == (1.0, 0.0)
        assert explain.blended_score == result.score == 1 / explain.rrf_rank
        _check_accounts_for_score(result)


def test_bm25_only_fallback_is_explained_too() -> None:
    app = _app(embedded=False)  # no vector index: the spec surface's degraded path
    results = app.searcher.with_profile(SEED_000).hybrid_query(
        "tokens", SearchRequest(limit=3, explain=True)
    )
    assert results
    for result in results:
        explain = result.explanation
        assert explain is not None
        assert {(c.source, c.query_type) for c in explain.contributions} == {("fts", "original")}
        assert explain.vector_scores == ()
        _check_accounts_for_score(result)


def test_structured_query_weights_the_first_list_double() -> None:
    app = _app()
    searches = [SubQuery("lex", "tokens"), SubQuery("vec", "how long does a login last")]
    results = app.searcher.structured_query(searches, SearchRequest(limit=4, explain=True))
    contributions = [c for r in results for c in _explained(r).contributions]
    assert {c.list_index for c in contributions} == {0, 1}
    assert all((c.weight == 2.0) == (c.list_index == 0) for c in contributions)
    assert {(c.list_index, c.source, c.query_type) for c in contributions} == {
        (0, "fts", "lex"),
        (1, "vec", "vec"),
    }
    for result in results:
        _check_accounts_for_score(result)


class UnloadableEmbedder(FakeEmbedder):
    """Vectors exist in the index, but the model cannot be loaded for the query."""

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        raise QmdError(MODEL_UNAVAILABLE, "embedding model not available")


def test_an_embedder_that_cannot_load_leaves_bm25_when_degrading() -> None:
    app = _app(reranker=False, expander=False)
    searcher = app.searcher
    broken = Searcher(app.store, app.lexical, app.vectors, SearchModels(UnloadableEmbedder()))
    results = broken.with_profile(SEED_000).hybrid_query(
        "tokens", SearchRequest(limit=3, explain=True)
    )
    assert results
    for result in results:
        assert {c.source for c in _explained(result).contributions} == {"fts"}
    with pytest.raises(QmdError) as raised:
        broken.hybrid_query(
            "tokens", SearchRequest(limit=3)
        )  # the compat surface: the failure is the answer
    assert raised.value.code == MODEL_UNAVAILABLE
    assert searcher.hybrid_query(
        "tokens", SearchRequest(limit=3)
    )  # the same index with a working model


@pytest.mark.parametrize("mode", ["hybrid", "structured"])
def test_no_explanation_unless_asked(mode: str) -> None:
    app = _app()
    if mode == "hybrid":
        results = app.searcher.hybrid_query("tokens", SearchRequest(limit=3))
    else:
        results = app.searcher.structured_query([SubQuery("lex", "tokens")], SearchRequest(limit=3))
    assert results and all(r.explanation is None for r in results)


def test_explaining_does_not_change_the_ranking() -> None:
    app = _app()
    plain = app.searcher.hybrid_query("refresh tokens", SearchRequest(limit=4))
    explained = app.searcher.hybrid_query("refresh tokens", SearchRequest(limit=4, explain=True))
    assert [(r.document.meta.path, r.score) for r in plain] == [
        (r.document.meta.path, r.score) for r in explained
    ]


_lists = st.lists(
    st.lists(st.sampled_from("abcdefgh"), max_size=6, unique=True), min_size=1, max_size=5
)


@given(_lists, st.lists(st.sampled_from([0.5, 1.0, 2.0]), max_size=5))
def test_contributions_sum_to_the_fused_score(
    ranked: list[list[str]], weights: list[float]
) -> None:
    traces = rrf_contributions(ranked, weights)
    for fused in reciprocal_rank_fusion(ranked, weights):
        entries = traces[fused.key]
        total = 0.0
        for entry in entries:
            total += entry.contribution
        assert total + top_rank_bonus(min(e.rank for e in entries)) == fused.score
        assert [e.list_index for e in entries] == sorted(e.list_index for e in entries)
    assert set(traces) == {key for ranked_list in ranked for key in ranked_list}


def test_default_surface_fuses_one_keyword_list_without_the_top_rank_bonus() -> None:
    """REQ-SPEC-QUERY-003: all-term matches and the any-term fill form one keyword list (as
    `search` ranks them) at weight 2.5 whose ranks start at 4; the vector list keeps 2.0."""
    app = _app(reranker=False, expander=False)
    searcher = app.searcher.with_profile(SEED_000)
    # "refresh tokens": auth.md and tokens.md hold both words, the other two neither; "signed
    # images": no note holds both, so every keyword hit is any-term fill
    for query, strict in (("refresh tokens", {"auth.md", "tokens.md"}), ("signed images", set())):
        results = searcher.hybrid_query(query, SearchRequest(limit=4, explain=True))
        keyword = _keyword_contributions(results)
        assert keyword, query
        assert {c.list_index for c in keyword.values()} == {0}  # one keyword list
        assert {(c.weight, c.rank_offset) for c in keyword.values()} == {(2.5, 3)}
        lexical = [r.document.meta.path for r in searcher.lex_search(query, SearchRequest(10))]
        assert sorted(keyword, key=lambda p: keyword[p].rank) == [
            p for p in lexical if p in keyword
        ]  # the keyword list is `search`'s own ranking, all-term matches first
        assert {p for p in keyword if keyword[p].rank <= len(strict)} == strict
        vector = [c for r in results for c in _explained(r).contributions if c.source == "vec"]
        assert vector and {c.weight for c in vector} == {2.0}
        assert {c.rank_offset for c in vector} == {0}
        for result in results:
            _check_accounts_for_score(result)
            if set(_explained(result).contributions) <= set(keyword.values()):
                # a keyword hit alone earns no bonus: at most 2.5 / (60 + 4)
                assert _explained(result).top_rank_bonus == 0.0


GEMMA = "hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf"


def test_an_embedder_measured_for_fusion_gets_its_own_weighting() -> None:
    """REQ-SPEC-QUERY-003 / docs/decisions/0061: with EmbeddingGemma the all-term matches are one
    list (weight 2.0, ranks from 4) and the any-term fill another (0.25, ranks from 11); the
    model is known by its file name, whatever the path or hub reference around it."""
    measured = {f.model: f.fill_fusion for f in FUSION_BY_EMBEDDER}
    assert SEED_000.fill_fusion_for(GEMMA) == measured["embeddinggemma-300M-Q8_0.gguf"]
    assert SEED_000.fill_fusion_for("/m/EMBEDDINGGEMMA-300M-Q8_0.GGUF") == SEED_000.fill_fusion_for(
        GEMMA
    )
    assert SEED_000.fill_fusion_for("openai:minilm@http://127.0.0.1:9/v1") == SEED_000.fill_fusion
    assert SEED_000.fill_fusion_for(None) == SEED_000.fill_fusion
    assert ORIGINAL_2_8_3.fill_fusion_for(GEMMA) is None  # the original's fusion, whatever model
    searcher = _app(reranker=False, expander=False, embedder_name=GEMMA).searcher
    searcher = searcher.with_profile(SEED_000)
    # "refresh tokens": auth.md and tokens.md hold both words (the all-term list); "signed
    # images": no note holds both, so every keyword hit is in the fill list
    for query, strict in (("refresh tokens", {"auth.md", "tokens.md"}), ("signed images", set())):
        results = searcher.hybrid_query(query, SearchRequest(limit=4, explain=True))
        keyword = [c for r in results for c in _explained(r).contributions if c.source == "fts"]
        by_path = _keyword_contributions(results)
        assert keyword, query
        expected = {(2.0, 3)} if strict else set()
        if set(by_path) - strict:
            expected.add((0.25, 10))
        assert {(c.weight, c.rank_offset) for c in keyword} == expected, query
        assert {p for p, c in by_path.items() if c.weight == 2.0} == strict & set(by_path)
        vector = [c for r in results for c in _explained(r).contributions if c.source == "vec"]
        assert vector and {(c.weight, c.rank_offset) for c in vector} == {(2.0, 0)}
        for result in results:
            _check_accounts_for_score(result)
