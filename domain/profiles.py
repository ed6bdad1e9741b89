"""How a surface searches: the differences between the original QMD 2.8.3 and the default
(seed 000) surface, as data rather than flags threaded through the use cases."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


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
    starting `rank_offset` places down (so it earns no top-rank bonus)."""

    weight: float
    rank_offset: int
    keyword_weight: float = 2.0  # the all-term keyword list's weight (the vector list has 2.0)
    keyword_rank_offset: int = 0


@dataclass(frozen=True)
class SearchProfile:
    name: str
    lexical_rule: LexicalRule
    on_model_failure: ModelFailure
    # Hybrid query with no vector index at all: BM25 only, no expansion and no rerank.
    bm25_only_without_vectors: bool
    # None: the any-term fill rides in the keyword list after the all-term matches.
    fill_fusion: FillFusion | None = None


ORIGINAL_2_8_3 = SearchProfile(
    name="original-2.8.3",
    lexical_rule=LexicalRule.ALL_TERMS,
    on_model_failure=ModelFailure.FAIL,
    bm25_only_without_vectors=False,
)

# Hybrid fusion on the surfaces with the any-term fill, tuned on the judged tldr set
# (benchmarks/bench_judged.py, docs/decisions/0031): the all-term keyword list weighs 1.5 and
# earns no top-rank bonus, the any-term fill is its own list at 0.25 from rank 11, so keyword
# filler cannot outvote the vector list.
DEFAULT_FILL_FUSION = FillFusion(
    weight=0.25, rank_offset=10, keyword_weight=1.5, keyword_rank_offset=3
)

SEED_000 = SearchProfile(
    name="seed-000",
    lexical_rule=LexicalRule.ANY_TERM_FILL,
    on_model_failure=ModelFailure.SKIP_STAGE,
    bm25_only_without_vectors=True,
    fill_fusion=DEFAULT_FILL_FUSION,
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
)

COMMAND_LINE_STRICT = SearchProfile(
    name="command-line-strict",
    lexical_rule=LexicalRule.ALL_TERMS,
    on_model_failure=ModelFailure.SKIP_STAGE,
    bm25_only_without_vectors=True,
)
