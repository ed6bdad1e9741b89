"""The real model set (`scripts/prepare_models.py --set real`): EmbeddingGemma-300M converted by
tooling/convert_gemma_embed.py loads in llama.cpp and, fed the original's EmbeddingGemma prompt
formats, gives paraphrases high cosines and unrelated sentences low ones, in English, in
Chinese and across the two; the Qwen2.5-Coder GGUF loads and answers.

Opt-in like the set itself: `real_models` marks every test (a default set-up deselects it; one
run without the set fails and says how to prepare it).
"""

from __future__ import annotations

from typing import Any

import pytest

from adapters.models.embed_text import detect_family, format_document, format_query
from tests.model_fakes import real_prepared_model, real_prepared_source
from tooling import real_models

pytestmark = [pytest.mark.models, pytest.mark.slow, pytest.mark.real_models]


@pytest.fixture(scope="module")
def gemma() -> Any:
    import llama_cpp

    path = real_prepared_model("embed")
    llm = llama_cpp.Llama(str(path), embedding=True, n_ctx=512, n_threads=1, verbose=False)
    yield llm
    llm.close()


def embedder(llm: Any) -> real_models.EmbedMany:
    def embed(texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in llm.embed(texts, normalize=True)]

    return embed


def query(text: str) -> str:
    return format_query("embeddinggemma", text)


def document(text: str) -> str:
    return format_document("embeddinggemma", "", text)


def test_the_converted_file_is_the_embedding_gemma_qmd_expects(gemma: Any) -> None:
    # the original (and ours) picks the prompt family from the file name
    assert detect_family(real_models.load_pins()["embed"].file) == "embeddinggemma"
    assert gemma.metadata["general.architecture"] == "gemma-embedding"
    assert gemma.metadata["gemma-embedding.pooling_type"] == "1"  # mean
    assert gemma.n_embd() == 768
    assert len(embedder(gemma)(["title: none | text: x"])[0]) == 768


def test_the_gguf_reproduces_the_upstream_weights_run_in_numpy(gemma: Any) -> None:
    """Conversion and quantisation lose nothing that matters: the same tokens as the upstream
    SentencePiece model (with BOS and EOS), and the vector of a numpy forward pass of the F32
    checkpoint (tooling/gemma_embed_reference.py) to within Q8_0's rounding."""
    import numpy as np

    from tooling.gemma_embed_reference import GemmaEmbedReference

    reference = GemmaEmbedReference(real_prepared_source())
    for text in (query(real_models.SENTENCES["en1"]), document(real_models.SENTENCES["zh3"])):
        assert gemma.tokenize(text.encode(), add_bos=True, special=True) == reference.tokenize(text)
        got = np.array(gemma.embed(text, normalize=True))
        assert float(got @ reference.embed(text)) >= 0.999, text


def test_queries_separate_paraphrases_from_unrelated_in_english_and_chinese(gemma: Any) -> None:
    got = real_models.similarities(embedder(gemma), query, query)
    assert got["en paraphrase"] >= 0.8, got
    assert got["zh paraphrase"] >= 0.8, got
    assert got["en unrelated"] <= 0.2, got
    assert got["zh unrelated"] <= 0.2, got
    assert min(got["en-zh translation"], got["en-zh translation 2"]) >= 0.8, got
    assert got["en-zh unrelated"] <= 0.2, got


def test_a_query_finds_its_paraphrase_among_documents(gemma: Any) -> None:
    got = real_models.similarities(embedder(gemma), query, document)
    for related, unrelated in (
        ("en paraphrase", "en unrelated"),
        ("zh paraphrase", "zh unrelated"),
        ("en-zh translation", "en-zh unrelated"),
    ):
        assert got[related] - got[unrelated] >= 0.4, (related, got)


def test_the_qwen_file_loads_and_answers() -> None:
    import llama_cpp

    llm = llama_cpp.Llama(
        str(real_prepared_model("generate")), n_ctx=256, n_threads=1, verbose=False
    )
    try:
        out: Any = llm("The capital of France is", max_tokens=4, temperature=0.0)
    finally:
        llm.close()
    assert "Paris" in out["choices"][0]["text"]
