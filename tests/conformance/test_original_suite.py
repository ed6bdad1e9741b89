"""The whole suite against the original QMD 2.8.3: its own goldens must all pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cases import load_cases
from tests.conformance.passes import suite_pass


@pytest.mark.original
@pytest.mark.parametrize(
    ("impl", "fixture", "transport"),
    [
        ("original-2.8.3", "default", "stdio"),
        ("original-2.8.3", "default", "http"),
        # the model-backed goldens: the original over the project's local GGUF files
        pytest.param("original-2.8.3-models", "local-models", "stdio", marks=pytest.mark.models),
        # the real set: the original's own default embedder, EmbeddingGemma-300M
        pytest.param(
            "original-2.8.3-real",
            "real-models",
            "stdio",
            marks=[pytest.mark.models, pytest.mark.real_models],
        ),
    ],
)
def test_full_suite_passes_against_the_original(
    original: tuple[str, list[str]], impl: str, fixture: str, transport: str, suite_reports: Path
) -> None:
    qmd, _ = original
    done = suite_pass(suite_reports, impl, transport, qmd_bin=qmd)
    assert done.returncode == 0, done.output
    data = done.report()
    compat = [
        c
        for c in load_cases()
        if "compat-2.8.3" in c.surfaces and c.fixture == fixture and transport in c.transports
    ]
    expected_runs = sum(len(c.eras) for c in compat)
    assert data["summary"] == {"passed": expected_runs, "failed": 0, "skipped": 0}
    assert done.stdout.rstrip().splitlines()[-1] == f"{expected_runs} passed, 0 failed, 0 skipped"
