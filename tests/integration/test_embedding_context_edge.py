"""Inputs at the edge of MiniLM's 512 positions, which abort the original (a real model).

The original 2.8.3 leaves a text of up to 512 tokens untruncated, then llama.cpp adds [CLS]
and [SEP]: 511 or 512 tokens need 513 or 514 positions and llama.cpp aborts the process
(`GGML_ASSERT(i01 >= 0 && i01 < ne01)` in get_rows, exit 134). BEIR SciFact abstract 371289
is such a text (511 tokens formatted as `title: … | text: …`); `qmd embed` of the original
dies on it (docs/compatibility.md). Ours truncates to the positions minus a margin, so every
length embeds.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pytest

from adapters.models.llama import LlamaEmbedder
from adapters.models.references import PREPARED_EMBED_FILE
from tests.model_fakes import prepared_model

if TYPE_CHECKING:
    import llama_cpp

pytestmark = pytest.mark.models  # llama_cpp is imported in the tests: a bare install collects this


def _body_with_tokens(vocab: llama_cpp.Llama, embedder: LlamaEmbedder, target: int) -> str:
    """A body whose formatted document text tokenizes to exactly `target` tokens."""
    words = ["alpha"] * target
    while True:
        text = embedder.format_document("Edge", " ".join(words))
        count = len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        if count == target:
            return " ".join(words)
        assert count > target, f"cannot reach {target} tokens (at {count})"
        words.pop()


def test_texts_that_abort_the_original_are_embedded() -> None:
    import llama_cpp

    model = str(prepared_model(PREPARED_EMBED_FILE))
    vocab = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    embedder = LlamaEmbedder(model, family="embeddinggemma", batch_size=2)
    try:
        items = [("Edge", _body_with_tokens(vocab, embedder, n)) for n in (510, 511, 512, 513)]
        vectors = embedder.embed_documents(items)
        assert len(vectors) == 4
        for vector in vectors:
            assert len(vector) == 384
            assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-3)
    finally:
        embedder.close()
