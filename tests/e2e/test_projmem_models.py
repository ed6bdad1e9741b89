"""projmem's vector and deep search with the real small GGUF models (MiniLM embeddings,
gemma-3-270m for expansion and reranking): every stage is reported with its time, and the
skip flags are honoured (REQ-PROJMEM-DEEP-001..003). Never skipped: missing models fail."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from domain.usecases.projmem import PIPELINE
from tests.e2e.test_models_e2e import MODEL_CALL_S, _model_env, _qmd
from tests.e2e.test_projmem_stdio import projmem_env
from tests.mcp_harness import StdioServer

pytestmark = pytest.mark.models

# no keyword of the corpus: only meaning (or an expansion) finds the refresh section
QUERY = "how long may a client keep using an old credential"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioServer]:
    env = _model_env(projmem_env(tmp_path_factory.mktemp("projmem-models")))
    embedded = _qmd(env, "embed")
    assert embedded.returncode == 0, embedded.stderr
    process = StdioServer(env, "--surface", "projmem")
    process.initialize()
    yield process
    process.kill()


def _stages(result: dict[str, object]) -> dict[str, dict[str, object]]:
    structured = result["structuredContent"]
    assert isinstance(structured, dict)
    return {str(s["name"]): s for s in structured["stages"]}


def test_vector_search_finds_a_section_by_meaning(server: StdioServer) -> None:
    result = server.call("projmem_vector_search", {"query": QUERY}, timeout=MODEL_CALL_S)
    structured = result["structuredContent"]
    assert structured["mode"] == "vector" and structured["count"] >= 1
    first = result["content"][0]["text"].splitlines()[0]
    assert re.fullmatch(r'#\d+ \| notes/[^|]+ \| "[^"]*" \| score: \d\.\d\d', first), first


def test_deep_search_reports_every_stage_with_timings(server: StdioServer) -> None:
    result = server.call("projmem_deep_search", {"query": QUERY}, timeout=MODEL_CALL_S)
    structured = result["structuredContent"]
    stages = _stages(result)
    assert list(stages) == list(PIPELINE)  # seed 002's eight stages, in order
    for name in ("bm25_search", "query_expansion", "query_embedding", "reranking"):
        assert stages[name]["skipped"] is False, (name, stages)
        assert float(stages[name]["ms"]) > 0.0  # type: ignore[arg-type]
    for name in ("vector_search", "rrf_fusion", "blending"):
        assert stages[name]["skipped"] is False and int(str(stages[name]["out"])) >= 1
    expanded = [(e["type"], e["query"]) for e in structured["expandedQueries"]]
    assert len(expanded) == len(set(expanded)) == stages["query_expansion"]["out"]
    assert structured["rerankingApplied"] is True
    assert structured["strongSignal"] is False
    assert isinstance(structured["expandedQueries"], list)
    assert structured["count"] >= 1
    for hit in structured["results"]:
        assert hit["rrfScore"] > 0 and hit["rerankerScore"] is not None
        assert hit["chunkId"] is not None and hit["headingPath"] is not None
    text = result["content"][0]["text"]
    assert "Re-ranking applied: yes" in text and "Pipeline stages:" in text
    assert re.search(r"  reranking: \d+\.\d ms, in \d+, out \d+", text)
    assert re.search(r"rrfScore: [\d.]+ \| rerankerScore: [\d.]+", text)


def test_deep_search_honours_the_skip_flags(server: StdioServer) -> None:
    result = server.call(
        "projmem_deep_search",
        {"query": QUERY, "skipExpansion": True, "skipReranking": True},
        timeout=MODEL_CALL_S,
    )
    structured = result["structuredContent"]
    stages = _stages(result)
    assert stages["query_expansion"] == {
        "name": "query_expansion",
        "skipped": True,
        "why": "skipExpansion",
    }
    assert stages["reranking"] == {"name": "reranking", "skipped": True, "why": "skipReranking"}
    assert float(stages["query_embedding"]["ms"]) > 0.0  # type: ignore[arg-type]
    assert structured["rerankingApplied"] is False
    assert structured["expandedQueries"] == []
    assert all(hit["rerankerScore"] is None for hit in structured["results"])
    assert "Re-ranking applied: no" in result["content"][0]["text"]
