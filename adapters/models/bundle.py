"""The set of model adapters the composition root hands to the use cases."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from domain.ports import Embedder, QueryExpander, Reranker

if TYPE_CHECKING:
    from adapters.models.idle import Resident
    from domain.usecases.status import EmbeddingIdentity

DEFAULT_EMBED_MODEL = "hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf"


def _unconfigured() -> EmbeddingIdentity:
    from domain.usecases.status import EmbeddingIdentity  # status's module: only when asked

    return EmbeddingIdentity(DEFAULT_EMBED_MODEL, "")


@dataclass
class Models:
    """The model adapters in use; any may be absent (the features then degrade or error)."""

    embedder: Embedder | None = None
    reranker: Reranker | None = None
    expander: QueryExpander | None = None
    # works out the configured embedding model's name and fingerprint, the first time
    # `identity` is read (by `status`): commands that never report it never pay for it
    identify: Callable[[], EmbeddingIdentity] = _unconfigured
    # whether vectors stored under a model name (first) are the configured model's (second)
    # (REQ-VEC-MODEL-001); the same text where nothing says more
    same_model: Callable[[str, str], bool] = operator.eq

    @cached_property
    def identity(self) -> EmbeddingIdentity:
        return self.identify()

    def residents(self) -> list[Resident]:
        """The loaded-on-demand models that can be unloaded when idle (local ones; a remote
        model server keeps its own)."""
        found: list[Resident] = []
        for model in (self.embedder, self.reranker, self.expander):
            resident = getattr(model, "resident", None)
            if resident is not None:
                found.append(resident)
        return found
