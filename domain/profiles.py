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
class SearchProfile:
    name: str
    lexical_rule: LexicalRule
    on_model_failure: ModelFailure
    # Hybrid query with no vector index at all: BM25 only, no expansion and no rerank.
    bm25_only_without_vectors: bool


ORIGINAL_2_8_3 = SearchProfile(
    name="original-2.8.3",
    lexical_rule=LexicalRule.ALL_TERMS,
    on_model_failure=ModelFailure.FAIL,
    bm25_only_without_vectors=False,
)

SEED_000 = SearchProfile(
    name="seed-000",
    lexical_rule=LexicalRule.ANY_TERM_FILL,
    on_model_failure=ModelFailure.SKIP_STAGE,
    bm25_only_without_vectors=True,
)

# The `qmd` command line: the default surface's lexical rule (any-term fill; `--strict` gives
# the original's all-terms rule, COMMAND_LINE_STRICT), so a question gets the same answer from
# the CLI and from the agent; a model that cannot be had skips its stage (said on stderr).
COMMAND_LINE = SearchProfile(
    name="command-line",
    lexical_rule=LexicalRule.ANY_TERM_FILL,
    on_model_failure=ModelFailure.SKIP_STAGE,
    bm25_only_without_vectors=True,
)

COMMAND_LINE_STRICT = SearchProfile(
    name="command-line-strict",
    lexical_rule=LexicalRule.ALL_TERMS,
    on_model_failure=ModelFailure.SKIP_STAGE,
    bm25_only_without_vectors=True,
)
