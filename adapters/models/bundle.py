"""The set of model adapters the composition root hands to the use cases."""

from __future__ import annotations

from dataclasses import dataclass, field

from adapters.models.idle import Resident
from domain.ports import Embedder, QueryExpander, Reranker
from domain.usecases.status import EmbeddingIdentity

DEFAULT_EMBED_MODEL = "hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf"


@dataclass
class Models:
    """The model adapters in use; any may be absent (the features then degrade or error)."""

    embedder: Embedder | None = None
    reranker: Reranker | None = None
    expander: QueryExpander | None = None
    identity: EmbeddingIdentity = field(
        default_factory=lambda: EmbeddingIdentity(DEFAULT_EMBED_MODEL, "")
    )

    def residents(self) -> list[Resident]:
        """The loaded-on-demand models that can be unloaded when idle (local ones; a remote
        model server keeps its own)."""
        found: list[Resident] = []
        for model in (self.embedder, self.reranker, self.expander):
            resident = getattr(model, "resident", None)
            if resident is not None:
                found.append(resident)
        return found
