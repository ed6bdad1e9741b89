"""`qmd embed` then `qmd vsearch` / `qmd query` with EmbeddingGemma-300M answer as the original
2.8.3 did on the same GGUF file (REQ-SEARCH-VEC-002): the goldens in
tests/data/real-model-cli-goldens.json were recorded from the original by
scripts/record_real_cli_goldens.py; here our `qmd` runs the same set-up and the same commands
over the same corpus (with the same cached query expansions).

Every byte outside the printed scores must be identical: the ranks, paths, titles, snippets,
layout. A printed cosine may differ within tooling.cli_goldens.SCORE_TOLERANCE (with a Q8_0
file two llama.cpp builds never give the same floats, ADR 0058); scores that come from rank
fusion alone (the typed `query`) must be identical too. The session (copy, collection add,
embed) runs once.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from tests.model_fakes import real_prepared_model
from tooling import cli_goldens

pytestmark = [pytest.mark.models, pytest.mark.slow, pytest.mark.real_models]

GOLDENS = cli_goldens.load_goldens()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> list[cli_goldens.Step]:
    embed = real_prepared_model("embed")
    real_prepared_model("generate")
    # the goldens hold for the very file they were recorded on
    assert _sha256(embed) == GOLDENS["models"][cli_goldens.EMBED_FILE]
    qmd = Path(sys.executable).parent / "qmd"
    setup, cases = cli_goldens.run_session(
        [str(qmd)],
        tmp_path_factory.mktemp("real-goldens"),
        models=embed.parent,
        # the original's 900-token chunks (our default fits chunks to the model's window)
        extra_env={"QMD_FIT_CHUNKS": "0"},
    )
    for step in setup:
        assert step.rc == 0, f"{step.argv}: {step.stderr}"
    return cases


def test_the_goldens_cover_the_recorded_commands() -> None:
    assert [tuple(c["argv"]) for c in GOLDENS["cases"]] == list(cli_goldens.CASES)
    assert GOLDENS["recorded_from"].startswith("qmd 2.8.3")


@pytest.mark.parametrize("index", range(len(cli_goldens.CASES)))
def test_our_answer_is_the_originals_to_the_printed_precision(
    ours: list[cli_goldens.Step], index: int
) -> None:
    golden = GOLDENS["cases"][index]
    step = ours[index]
    assert list(step.argv) == golden["argv"]
    assert step.rc == golden["rc"], step.stderr
    assert cli_goldens.differences(golden["stdout"], step.stdout) == [], step.stdout


def test_fused_scores_are_byte_identical(ours: list[cli_goldens.Step]) -> None:
    """The typed query's scores come from reciprocal rank fusion, not from model floats."""
    index = next(n for n, argv in enumerate(cli_goldens.CASES) if argv[0] == "query")
    assert ours[index].stdout == GOLDENS["cases"][index]["stdout"]
