"""The model configurations the quality benchmarks compare (`--models NAME[,NAME...]`).

Each names the GGUF files in `.models/` (scripts/prepare_models.py; `--set real` for
EmbeddingGemma and Qwen) for the three roles, passed to `qmd` as `QMD_EMBED_MODEL`,
`QMD_GENERATE_MODEL` and `QMD_RERANK_MODEL` (`none`: the stage is off):

  stand-in    all-MiniLM-L6-v2 f16 embeddings; gemma-3-270m for expansion and reranking
  gemma       EmbeddingGemma-300M Q8_0 embeddings; no expansion or rerank model
  gemma+qwen  EmbeddingGemma-300M Q8_0; Qwen2.5-Coder-1.5B-Instruct Q4_K_M for expansion and
              reranking (a yes/no logit reranker)
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.harness import REPO, BenchError

MODELS_DIR = REPO / ".models"
MINILM = "all-MiniLM-L6-v2-f16.gguf"
GEMMA_EMBED = "embeddinggemma-300M-Q8_0.gguf"
GEMMA_270M = "gemma-3-270m-q4_k_m.gguf"
QWEN = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


@dataclass(frozen=True)
class ModelSet:
    """The GGUF files of one configuration; `None`: that stage has no model."""

    name: str
    embed: str
    generate: str | None
    rerank: str | None

    def env(self) -> dict[str, str]:
        def path(file: str | None) -> str:
            return str(MODELS_DIR / file) if file else "none"

        return {
            "QMD_EMBED_MODEL": path(self.embed),
            "QMD_GENERATE_MODEL": path(self.generate),
            "QMD_RERANK_MODEL": path(self.rerank),
        }

    @property
    def files(self) -> list[str]:
        return [f for f in (self.embed, self.generate, self.rerank) if f]


MODEL_SETS = {
    "stand-in": ModelSet("stand-in", MINILM, GEMMA_270M, GEMMA_270M),
    "gemma": ModelSet("gemma", GEMMA_EMBED, None, None),
    "gemma+qwen": ModelSet("gemma+qwen", GEMMA_EMBED, QWEN, QWEN),
}
# a kept index is per embedding model: gemma and gemma+qwen share one
EMBEDDER_LABEL = {MINILM: "minilm", GEMMA_EMBED: "gemma"}


def parse_model_sets(text: str) -> list[ModelSet]:
    """`stand-in,gemma` -> those sets, each checked to have its files in `.models/`."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODEL_SETS]
    if unknown or not names:
        raise BenchError(f"--models: choose from {', '.join(MODEL_SETS)} (got {text!r})")
    sets = [MODEL_SETS[n] for n in names]
    for model_set in sets:
        missing = [f for f in model_set.files if not (MODELS_DIR / f).is_file()]
        if missing:
            raise BenchError(
                f"{model_set.name}: {', '.join(missing)} not in .models/; run "
                "scripts/prepare_models.py (--set real for EmbeddingGemma and Qwen)"
            )
    return sets
