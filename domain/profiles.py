"""How a surface searches: the differences between the original QMD 2.8.3 and the default
(seed 000) surface, as data rather than flags threaded through the use cases."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from domain.model import model_file_name

# At most this many query expansions of each kind (lex, vec, hyde) are searched on this
# project's surfaces (REQ-SEARCH-EXPAND-DISTINCT-001). The original's expansion model writes
# two or three of each: a well-behaved answer is kept whole, and a repeating one cannot add
# more than nine ranked lists beside the query's own.
EXPANSIONS_PER_KIND = 3


class LexicalRule(Enum):
    """Which documents a multi-term BM25 query matches (docs/decisions/0007)."""

    ALL_TERMS = "all-terms"  # every term must match, as in the original
    ANY_TERM_FILL = "any-term-fill"  # all-term matches first, then any-term ones fill the limit


class ModelFailure(Enum):
    """What a model that cannot be loaded does to the call that needed it."""

    FAIL = "fail"  # the failure is the answer, as in the original
    SKIP_STAGE = "skip-stage"  # that stage (expansion, vectors, rerank) is skipped


@dataclass(frozen=True)
class FillFusion:
    """How hybrid fusion weighs the any-term fill: as its own list with this weight, its ranks
    starting `rank_offset` places down (so it earns no top-rank bonus). `merged`: the fill
    instead continues the all-term list as one keyword list (the `search` tool's own ranking),
    at the keyword list's weight and offset; `weight` and `rank_offset` are then unused."""

    weight: float
    rank_offset: int
    keyword_weight: float = 2.0  # the all-term keyword list's weight (the vector list has 2.0)
    keyword_rank_offset: int = 0
    merged: bool = False


@dataclass(frozen=True)
class SearchProfile:
    """The rules a surface searches by (lexical rule, model failures, fill fusion)."""

    name: str
    lexical_rule: LexicalRule
    on_model_failure: ModelFailure
    # Hybrid query with no vector index at all: BM25 only, no expansion and no rerank.
    bm25_only_without_vectors: bool
    # None: the any-term fill rides in the keyword list after the all-term matches.
    fill_fusion: FillFusion | None = None
    # The weighting measured for an embedder, chosen over `fill_fusion` when the embedder is
    # one of these (docs/decisions/0061): how far the keyword list may be trusted depends on
    # how good the vectors are.
    fusion_by_embedder: tuple[EmbedderFusion, ...] = ()
    # Query expansions: at most this many distinct ones of each kind are searched
    # (domain/expansions.py, REQ-SEARCH-EXPAND-DISTINCT-001); None: every one the model wrote,
    # repeats included, as the original searches them.
    expansions_per_kind: int | None = None

    def fill_fusion_for(self, embedder: str | None) -> FillFusion | None:
        """The fill fusion for a query embedded by `embedder` (a model reference; None: no
        embedder): the one measured for that model file, else `fill_fusion`."""
        if embedder is not None and self.fill_fusion is not None:
            name = model_file_name(embedder)
            for measured in self.fusion_by_embedder:
                if measured.model.lower() == name:
                    return measured.fill_fusion
        return self.fill_fusion


ORIGINAL_2_8_3 = SearchProfile(
    name="original-2.8.3",
    lexical_rule=LexicalRule.ALL_TERMS,
    on_model_failure=ModelFailure.FAIL,
    bm25_only_without_vectors=False,
)

# Hybrid fusion on the surfaces with the any-term fill (docs/decisions/0045, which revises
# 0031): the keyword list is the `search` tool's own ranking (all-term matches, then the
# any-term fill) at weight 2.5 against the vector list's 2.0, its ranks starting at 4 so only
# the vector list earns the top-rank bonus. Measured on two judged sets
# (benchmarks/bench_fusion.py) with the bundled MiniLM: the middle of the plateau where `query`
# beats BM25 on SciFact and ties vectors on tldr. An embedder nobody measured gets it too.
DEFAULT_FILL_FUSION = FillFusion(
    weight=0.0, rank_offset=0, keyword_weight=2.5, keyword_rank_offset=3, merged=True
)


@dataclass(frozen=True)
class EmbedderFusion:
    """The fill fusion measured for one embedding model, matched by its file name."""

    model: str
    fill_fusion: FillFusion


# docs/decisions/0061, benchmarks/bench_fusion.py on SciFact (5,183 abstracts, 300 queries) and
# tldr (716 pages, 54 questions). No one weighting meets `query` >= max(search, vsearch) on
# both sets with both embedders: BM25 is the stronger list on SciFact with MiniLM, and far the
# weaker one on both sets with EmbeddingGemma.
FUSION_BY_EMBEDDER: tuple[EmbedderFusion, ...] = (
    # SciFact +0.021, tldr +0.000 over the target (0045)
    EmbedderFusion("all-MiniLM-L6-v2-f16.gguf", DEFAULT_FILL_FUSION),
    # all-term matches weigh as much as the vector list, from rank 4; the any-term fill is its
    # own light list from rank 11. SciFact +0.004, tldr +0.003 (0045's weighting: -0.001, -0.026)
    EmbedderFusion(
        "embeddinggemma-300M-Q8_0.gguf",
        FillFusion(weight=0.25, rank_offset=10, keyword_weight=2.0, keyword_rank_offset=3),
    ),
)

SEED_000 = SearchProfile(
    name="seed-000",
    lexical_rule=LexicalRule.ANY_TERM_FILL,
    on_model_failure=ModelFailure.SKIP_STAGE,
    bm25_only_without_vectors=True,
    fill_fusion=DEFAULT_FILL_FUSION,
    fusion_by_embedder=FUSION_BY_EMBEDDER,
    expansions_per_kind=EXPANSIONS_PER_KIND,
)

# The `qmd` command line: the default surface's lexical rule (any-term fill; `--strict` gives
# the original's all-terms rule, COMMAND_LINE_STRICT), so a question gets the same answer from
# the CLI and from the agent; a model that cannot be had skips its stage (said on stderr).
COMMAND_LINE = SearchProfile(
    name="command-line",
    lexical_rule=LexicalRule.ANY_TERM_FILL,
    on_model_failure=ModelFailure.SKIP_STAGE,
    bm25_only_without_vectors=True,
    fill_fusion=DEFAULT_FILL_FUSION,
    fusion_by_embedder=FUSION_BY_EMBEDDER,
    expansions_per_kind=EXPANSIONS_PER_KIND,
)

COMMAND_LINE_STRICT = SearchProfile(
    name="command-line-strict",
    lexical_rule=LexicalRule.ALL_TERMS,
    on_model_failure=ModelFailure.SKIP_STAGE,
    bm25_only_without_vectors=True,
    expansions_per_kind=EXPANSIONS_PER_KIND,
)
