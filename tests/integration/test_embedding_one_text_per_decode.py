"""A chunk's vector does not depend on the chunks embedded beside it (REQ-SEARCH-VEC-002).

The original embeds one text per llama.cpp decode (`getEmbeddingFor` in a loop); ours packed
up to 32 texts into one decode, where each attends over the whole packed batch under a mask.
The floats then depended on the neighbours (MiniLM: 4e-5 apart; EmbeddingGemma Q8_0: cosine
0.9997) and the CPU work grew with the square of the packed length. Now every text has a
decode of its own, so `qmd embed` gives a document the same vector whichever batch it falls
in, and a query gives the same vector as a document with the same text.
"""

from __future__ import annotations

import pytest

from adapters.models.llama import LlamaEmbedder
from adapters.models.references import PREPARED_EMBED_FILE
from tests.model_fakes import prepared_model

pytestmark = pytest.mark.models

ITEMS = [
    ("Authentication", "Clients authenticate with OAuth 2.0 bearer tokens. Tokens rotate."),
    (
        "Architecture",
        "The search service has three layers: an indexer, a query planner and a ranker. "
        "The indexer splits documents into chunks and the ranker fuses the result lists.",
    ),
    ("Short", "cache"),
]


def test_a_vector_is_the_same_alone_or_among_others() -> None:
    embedder = LlamaEmbedder(str(prepared_model(PREPARED_EMBED_FILE)), batch_size=32)
    try:
        together = embedder.embed_documents(ITEMS)
        alone = [embedder.embed_documents([item])[0] for item in ITEMS]
        reordered = embedder.embed_documents(ITEMS[::-1])[::-1]
    finally:
        embedder.close()
    assert together == alone  # bit for bit, not close
    assert reordered == alone
