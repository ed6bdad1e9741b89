"""Embedder, Reranker and QueryExpander contracts, run against the fakes, llama.cpp and the
remote adapters (adapters/models/remote.py).

The llama.cpp runs use the stand-in models from `scripts/prepare_models.py`: all-MiniLM-L6-v2
(converted to GGUF) for embeddings, and gemma-3-270m (a base model) for reranking and
expansion. gemma's relevance judgements are meaningless, so the reranker and expander
contracts check shape, ranges, determinism and fallbacks, never quality.

The remote runs talk to a real `llama_cpp.server` serving the same files on loopback
(tests/remote_servers.py): `openai` directly; `ollama` through a shim translating Ollama's
native API to that server (no Ollama is installable here); the `/rerank` endpoint shape
through the shim too (llama_cpp.server has none), scored by the real MiniLM embeddings.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from adapters.models.llama import LlamaEmbedder, LlamaQueryExpander, LlamaReranker
from adapters.models.references import PREPARED_EMBED_FILE, PREPARED_GENERATE_FILE
from adapters.models.remote import RemoteEmbedder, RemoteQueryExpander, RemoteReranker
from domain.ports import Embedder, QueryExpander, Reranker
from tests.model_fakes import (
    FakeEmbedder,
    FakeExpander,
    FakeReranker,
    prepared_model,
    words,
)
from tests.remote_servers import CHAT_ALIAS, EMBED_ALIAS, model_server, shim

IMPLEMENTATIONS = ["fake", pytest.param("llama", marks=pytest.mark.models)]
REMOTE = [
    pytest.param("openai", marks=pytest.mark.models),
    pytest.param("ollama", marks=pytest.mark.models),
]
RERANK_REMOTE = [
    pytest.param("openai-chat", marks=pytest.mark.models),
    pytest.param("openai-endpoint", marks=pytest.mark.models),
    pytest.param("ollama", marks=pytest.mark.models),
]
__all__ = ["model_server", "shim"]  # session fixtures, imported for pytest to find


def remote_reference(request: pytest.FixtureRequest, alias: str, options: str = "") -> str:
    """An `openai:`/`ollama:` reference to the real server (or the shim in front of it)."""
    kind = str(request.param)
    suffix = f"?{options}" if options else ""
    if kind.startswith("ollama"):
        shim_server = request.getfixturevalue("shim")
        return f"ollama:{alias}@{shim_server.base_url}{suffix}"
    if kind == "openai-endpoint":
        shim_server = request.getfixturevalue("shim")
        return f"openai:{alias}@{shim_server.v1}{suffix}"
    server = request.getfixturevalue("model_server")
    return server.reference(alias, options)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


# ------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", params=IMPLEMENTATIONS + REMOTE)
def embedder(request: pytest.FixtureRequest) -> Iterator[Embedder]:
    if request.param == "fake":
        yield FakeEmbedder()
        return
    if request.param in ("openai", "ollama"):
        remote = RemoteEmbedder(remote_reference(request, EMBED_ALIAS, "batch=4"), env={})
        yield remote
        remote.close()
        return
    real = LlamaEmbedder(str(prepared_model(PREPARED_EMBED_FILE)), batch_size=4)
    yield real
    real.close()


@pytest.fixture(scope="module", params=IMPLEMENTATIONS + RERANK_REMOTE)
def reranker(request: pytest.FixtureRequest) -> Iterator[Reranker]:
    if request.param == "fake":
        yield FakeReranker()
        return
    if request.param == "openai-endpoint":
        remote = RemoteReranker(remote_reference(request, EMBED_ALIAS, "rerank=endpoint"), env={})
        yield remote
        remote.close()
        return
    if request.param in ("openai-chat", "ollama"):
        options = "rerank=chat" if request.param == "openai-chat" else ""
        remote = RemoteReranker(remote_reference(request, CHAT_ALIAS, options), env={})
        yield remote
        remote.close()
        return
    real = LlamaReranker(str(prepared_model(PREPARED_GENERATE_FILE)), context_size=1024)
    yield real
    real.close()


@pytest.fixture(scope="module", params=IMPLEMENTATIONS + REMOTE)
def expander(request: pytest.FixtureRequest) -> Iterator[QueryExpander]:
    if request.param == "fake":
        yield FakeExpander()
        return
    if request.param in ("openai", "ollama"):
        remote = RemoteQueryExpander(remote_reference(request, CHAT_ALIAS), env={}, max_tokens=24)
        yield remote
        remote.close()
        return
    real = LlamaQueryExpander(
        str(prepared_model(PREPARED_GENERATE_FILE)), context_size=512, max_tokens=24
    )
    yield real
    real.close()


# ------------------------------------------------------------------------------- Embedder

CATS_QUERY = "how long do cats sleep"
CATS_DOC = ("Cats", "Cats sleep for twelve to sixteen hours a day, mostly during daylight.")
TAX_DOC = ("Taxes", "Quarterly tax filings are due in April, June, September and January.")


def test_embedder_names_its_model(embedder: Embedder) -> None:
    assert isinstance(embedder.model_name, str)
    assert embedder.model_name


def test_embedder_returns_one_unit_vector_per_text_with_fixed_dimensions(
    embedder: Embedder,
) -> None:
    queries = embedder.embed_queries(["alpha", "beta gamma", CATS_QUERY])
    documents = embedder.embed_documents([CATS_DOC, TAX_DOC])
    assert len(queries) == 3
    assert len(documents) == 2
    dims = {len(v) for v in queries + documents}
    assert len(dims) == 1
    assert dims.pop() >= 8
    for vector in queries + documents:
        assert all(math.isfinite(x) for x in vector)
        assert norm(vector) == pytest.approx(1.0, abs=1e-3)


def test_embedder_handles_empty_batches_and_empty_text(embedder: Embedder) -> None:
    assert embedder.embed_queries([]) == []
    assert embedder.embed_documents([]) == []
    (vector,) = embedder.embed_documents([("", "")])
    assert norm(vector) == pytest.approx(1.0, abs=1e-3)


def test_embedder_is_deterministic_and_batch_independent(embedder: Embedder) -> None:
    texts = [CATS_QUERY, "a completely different question about taxes", "x"]
    together = embedder.embed_queries(texts)
    alone = [embedder.embed_queries([t])[0] for t in texts]
    for a, b in zip(together, alone, strict=True):
        assert cosine(a, b) == pytest.approx(1.0, abs=1e-4)
    for again, first in zip(embedder.embed_queries(texts), together, strict=True):
        assert again == pytest.approx(first, abs=1e-5)


def test_embedder_places_related_text_closer(embedder: Embedder) -> None:
    (query,) = embedder.embed_queries([CATS_QUERY])
    cats, tax = embedder.embed_documents([CATS_DOC, TAX_DOC])
    assert cosine(query, cats) > cosine(query, tax)


def test_embedder_counts_tokens_monotonically(embedder: Embedder) -> None:
    short = embedder.count_tokens("cats sleep")
    longer = embedder.count_tokens("cats sleep " * 50)
    assert embedder.count_tokens("") == 0
    assert 1 <= short < longer


def test_embedder_accepts_text_longer_than_its_context(embedder: Embedder) -> None:
    text = "Cats sleep in the sun. " * 2000  # ~12k tokens: beyond every context size
    (vector,) = embedder.embed_documents([("Long", text)])
    assert norm(vector) == pytest.approx(1.0, abs=1e-3)


# ------------------------------------------------------------------------------- Reranker

DOCS = [
    "Cats sleep for twelve to sixteen hours a day.",
    "Quarterly tax filings are due in April.",
    "Dogs need daily walks.",
]


def test_reranker_names_its_model(reranker: Reranker) -> None:
    assert reranker.model_name


def test_reranker_scores_each_document_in_unit_interval(reranker: Reranker) -> None:
    scores = reranker.rerank("how long do cats sleep", DOCS)
    assert len(scores) == len(DOCS)
    assert all(0.0 <= s <= 1.0 and math.isfinite(s) for s in scores)


def test_reranker_handles_no_documents(reranker: Reranker) -> None:
    assert reranker.rerank("anything", []) == []


def test_reranker_score_does_not_depend_on_position_or_company(reranker: Reranker) -> None:
    query = "how long do cats sleep"
    forward = reranker.rerank(query, DOCS)
    backward = reranker.rerank(query, list(reversed(DOCS)))
    single = [reranker.rerank(query, [d])[0] for d in DOCS]
    assert list(reversed(backward)) == pytest.approx(forward, abs=1e-4)
    assert single == pytest.approx(forward, abs=1e-4)


def test_reranker_gives_duplicates_the_same_score(reranker: Reranker) -> None:
    scores = reranker.rerank("cats", [DOCS[0], DOCS[1], DOCS[0]])
    assert scores[0] == scores[2]


# ------------------------------------------------------------------------------- Expander


def test_expander_names_its_model(expander: QueryExpander) -> None:
    assert expander.model_name


@pytest.mark.parametrize("query", ["rate limiter design", "how do cats sleep"])
def test_expander_returns_typed_single_line_queries_sharing_a_query_term(
    expander: QueryExpander, query: str
) -> None:
    items = expander.expand(query)
    assert items
    terms = set(words(query))
    for item in items:
        assert item.type in ("lex", "vec", "hyde")
        assert item.query.strip()
        assert "\n" not in item.query
        assert item.query != query  # the query itself is searched anyway
        assert terms & set(words(item.query)) or any(t in item.query.lower() for t in terms)


def test_expander_is_deterministic(expander: QueryExpander) -> None:
    assert expander.expand("sqlite vector search") == expander.expand("sqlite vector search")


def test_expander_keeps_queries_without_ascii_terms(expander: QueryExpander) -> None:
    items = expander.expand("日本語の検索")
    assert items
    assert all(item.type in ("lex", "vec", "hyde") and item.query.strip() for item in items)
