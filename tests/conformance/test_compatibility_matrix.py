"""The committed compatibility matrix (docs/compatibility.md) is what a run measures now.

The matrix reads the reports of the suite passes against the original and against ours on
every surface (stdio and HTTP, the model-backed profiles included), the passes
test_original_suite.py and test_ours_suite.py run, and fails when the page states any of those
columns' cells otherwise. It runs no pass the suite tests run: tests/conformance/passes.py
runs each pass once a session and keeps its report. A pass no suite test ran (a `-k`
selection, or a test another worker has not reached) is run here, so the check holds in any
order and on any number of workers. The third-party ports' columns are not re-measured
(installing and running them adds about 10 minutes); regenerate the page with
scripts/compatibility_matrix.sh when they change."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conformance.helpers import REPO
from tests.conformance.passes import MATRIX_SCRIPT, ensure_passes, matrix_passes


@pytest.mark.original
@pytest.mark.models
def test_committed_matrix_matches_a_fresh_run(
    original: tuple[str, list[str]], suite_reports: Path
) -> None:
    ensure_passes(suite_reports, matrix_passes())
    proc = subprocess.run(
        ["bash", str(MATRIX_SCRIPT), "--check", "--from-reports", str(suite_reports)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    assert "docs/compatibility.md: matches for original 2.8.3, ours, --compat 2.8.3" in (
        proc.stdout
    )


def test_the_check_names_a_missing_report_and_runs_nothing(tmp_path: Path) -> None:
    """Reports from a session where one suite test did not run: the check says which
    report is missing instead of running the pass itself or checking fewer columns."""
    passes = matrix_passes()
    for impl, transport in passes[1:]:
        (tmp_path / f"{impl}.{transport}.json").write_text('{"results": []}', encoding="utf-8")
    proc = subprocess.run(
        ["bash", str(MATRIX_SCRIPT), "--check", "--from-reports", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    impl, transport = passes[0]
    assert proc.returncode == 1
    assert f"no report {tmp_path / f'{impl}.{transport}.json'}" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{i}.{t}.json" for i, t in passes[1:]
    )
