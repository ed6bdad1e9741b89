"""`qmd embed` then `qmd vsearch` / `qmd query` with EmbeddingGemma-300M answer as the original
2.8.3 did on the same GGUF file (REQ-SEARCH-VEC-002): the goldens in
tests/data/real-model-cli-goldens.json were recorded from the original by
scripts/record_real_cli_goldens.py; here our `qmd` runs the same set-up and the same commands
over the same corpus (with the same cached query expansions).

When our llama.cpp is the original's CPU build (the ggml variant the original loaded when the
goldens were recorded, compiled by GCC 11: scripts/install_llama.sh records which build it
made), every answer must be the original's byte for byte: EmbeddingGemma's vectors are then its
own, bit for bit (ADR 0058). Any other build (another CPU, no GCC 11) rounds the Q8_0 kernels
differently: every byte outside the printed scores must still be identical (the ranks, paths,
titles, snippets, layout), and a printed cosine may differ within
tooling.cli_goldens.SCORE_TOLERANCE. Scores that come from rank fusion alone (the typed
`query`) must be identical either way. The session (copy, collection add, embed) runs once.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest

from tests import run_summary
from tests.model_fakes import real_prepared_model
from tooling import cli_goldens, ggml_cpu_variant, llama_build

pytestmark = [pytest.mark.models, pytest.mark.slow, pytest.mark.real_models]

GOLDENS = cli_goldens.load_goldens()
# scripts/install_llama.sh's name for the build the original ran when the goldens were recorded
ORIGINALS_BUILD = llama_build.originals_build_id(GOLDENS["ggml_cpu_variant"])
# the build recorded beside the llama_cpp libraries `qmd` loads
OUR_BUILD = llama_build.installed()
SAME_BUILD = llama_build.byte_identical(OUR_BUILD, GOLDENS["ggml_cpu_variant"])
SUMMARY_SECTION = "real-model goldens"


@pytest.fixture
def says_which_comparison() -> None:
    """The run's summary names our build and the comparison (tests/run_summary.py), so a CI
    log tells whether byte identity was checked there."""
    line = llama_build.report_line(OUR_BUILD, GOLDENS["ggml_cpu_variant"])
    run_summary.report(SUMMARY_SECTION, line)


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


@pytest.mark.usefixtures("says_which_comparison")
def test_where_the_original_build_can_be_made_it_is_ours() -> None:
    """On a CPU that picks the recorded variant, with GCC 11 at hand, set-up builds the
    original's ggml; the comparisons below are then byte for byte, not within a tolerance."""
    can = ggml_cpu_variant.this_machine() == GOLDENS["ggml_cpu_variant"] and all(
        shutil.which(tool) for tool in ("gcc-11", "g++-11")
    )
    assert can == SAME_BUILD, (
        f"our llama.cpp build is {OUR_BUILD.build_id!r}, the goldens' is {ORIGINALS_BUILD!r}: "
        "run scripts/install_llama.sh"
    )


@pytest.mark.usefixtures("says_which_comparison")
@pytest.mark.parametrize("index", range(len(cli_goldens.CASES)))
def test_our_answer_is_the_originals(ours: list[cli_goldens.Step], index: int) -> None:
    golden = GOLDENS["cases"][index]
    step = ours[index]
    assert list(step.argv) == golden["argv"]
    assert step.rc == golden["rc"], step.stderr
    if SAME_BUILD:
        assert step.stdout == golden["stdout"]
    else:
        assert cli_goldens.differences(golden["stdout"], step.stdout) == [], step.stdout


def test_fused_scores_are_byte_identical(ours: list[cli_goldens.Step]) -> None:
    """The typed query's scores come from reciprocal rank fusion, not from model floats."""
    index = next(n for n, argv in enumerate(cli_goldens.CASES) if argv[0] == "query")
    assert ours[index].stdout == GOLDENS["cases"][index]["stdout"]
