"""What a query with models costs: the reranker evaluates the query's shared prompt head once
per query, not once per candidate, where the model's cache allows it; and the expander stops a
runaway line (REQ-SEARCH-EXPAND-LINE-001) instead of writing it to the 600-token cap.

The stand-in tests run on gemma-3-270m (a sliding-window cache: no prefix reuse); the real
ones on Qwen2.5-Coder-1.5B-Instruct (a plain cache), the model the cost was measured with."""

from __future__ import annotations

import pytest

from adapters.models.llama import LlamaQueryExpander, LlamaReranker, rerank_prompt_parts
from adapters.models.references import PREPARED_GENERATE_FILE
from tests.model_fakes import prepared_model, real_prepared_model

QUERY = "how do I remove a directory and everything inside"
DOCS = [
    "rm -r removes a directory and its contents recursively; add -f to skip prompts.",
    "du -sh shows the disk usage of a folder in human-readable units.",
    "scp copies a file to another computer over ssh.",
]


def _prompt_sizes(reranker: LlamaReranker, query: str, docs: list[str]) -> tuple[int, list[int]]:
    """(head tokens, [document + tail tokens per document]) of the rerank prompts."""
    llm = reranker.resident.get()
    before, after = rerank_prompt_parts(query, reranker.instruction)
    head = len(llm.tokenize(before.encode(), add_bos=True, special=True))
    tail = len(llm.tokenize(after.encode(), add_bos=False, special=True))
    return head, [len(llm.tokenize(d.encode(), add_bos=False, special=False)) + tail for d in docs]


def _fresh_scores(reranker: LlamaReranker, query: str, docs: list[str]) -> list[float]:
    """Each document scored from an empty context (no head kept from a call before)."""
    scores = []
    for doc in docs:
        reranker.resident.get().reset()
        scores += reranker.rerank(query, [doc])
    return scores


@pytest.mark.models
def test_a_sliding_window_reranker_evaluates_every_prompt_whole() -> None:
    reranker = LlamaReranker(str(prepared_model(PREPARED_GENERATE_FILE)), context_size=1024)
    try:
        scores = reranker.rerank(QUERY, DOCS)
        head, rest = _prompt_sizes(reranker, QUERY, DOCS)
        assert reranker.evaluated_tokens == len(DOCS) * head + sum(rest)
        assert scores == pytest.approx(_fresh_scores(reranker, QUERY, DOCS), abs=1e-9)
    finally:
        reranker.close()


@pytest.mark.models
def test_the_expander_stops_a_line_at_its_token_budget() -> None:
    model = str(prepared_model(PREPARED_GENERATE_FILE))
    whole = LlamaQueryExpander(model, context_size=512, max_tokens=32, line_tokens=None)
    cut = LlamaQueryExpander(model, context_size=512, max_tokens=32, line_tokens=3)
    try:
        written, stopped = whole.generate(QUERY), cut.generate(QUERY)
        llm = cut.resident.get()
        sizes = [len(llm.tokenize(line.encode(), add_bos=False)) for line in stopped.split("\n")]
    finally:
        whole.close()
        cut.close()
    # the same seeded sampling: the budget cuts the same text short, every line at <= 3 tokens
    assert len(written) > len(stopped) > 0
    assert written.startswith(stopped), (written, stopped)
    assert max(sizes) <= 3, (stopped, sizes)


@pytest.mark.models
@pytest.mark.slow
@pytest.mark.real_models
def test_the_real_reranker_evaluates_the_query_head_once_per_query() -> None:
    reranker = LlamaReranker(
        str(real_prepared_model("generate")), context_size=1024, force_cpu=True, n_threads=2
    )
    try:
        scores = reranker.rerank(QUERY, DOCS)
        head, rest = _prompt_sizes(reranker, QUERY, DOCS)
        assert reranker.evaluated_tokens == head + sum(rest)
        # the same answers as prompts evaluated from an empty context
        assert scores == pytest.approx(_fresh_scores(reranker, QUERY, DOCS), abs=1e-9)
        assert scores[0] > max(scores[1:])
        # another query shares less than its head: its first prompt is evaluated whole
        before = reranker.evaluated_tokens
        reranker.rerank("disk usage of a folder", DOCS[:1])
        other_head, other_rest = _prompt_sizes(reranker, "disk usage of a folder", DOCS[:1])
        assert reranker.evaluated_tokens - before == other_head + other_rest[0]
    finally:
        reranker.close()
