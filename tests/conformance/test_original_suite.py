"""The whole suite against the original QMD 2.8.3: its own goldens must all pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.cases import load_cases
from tests.conformance.helpers import run_cli


@pytest.mark.original
@pytest.mark.parametrize(
    ("impl", "fixture", "transport"),
    [
        ("original-2.8.3", "default", "stdio"),
        ("original-2.8.3", "default", "http"),
        # the model-backed goldens: the original over the project's local GGUF files
        pytest.param("original-2.8.3-models", "local-models", "stdio", marks=pytest.mark.models),
    ],
)
def test_full_suite_passes_against_the_original(
    original: tuple[str, list[str]], impl: str, fixture: str, transport: str, tmp_path: Path
) -> None:
    qmd, _ = original
    report = tmp_path / "report.json"
    proc = run_cli(
        "run",
        "--impl",
        impl,
        "--qmd-bin",
        qmd,
        "--transport",
        transport,
        "--timeout",
        "120",
        "--report-json",
        str(report),
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    data = json.loads(report.read_text())
    compat = [
        c
        for c in load_cases()
        if "compat-2.8.3" in c.surfaces and c.fixture == fixture and transport in c.transports
    ]
    expected_runs = sum(len(c.eras) for c in compat)
    assert data["summary"] == {"passed": expected_runs, "failed": 0, "skipped": 0}
    assert proc.stdout.rstrip().splitlines()[-1] == f"{expected_runs} passed, 0 failed, 0 skipped"
