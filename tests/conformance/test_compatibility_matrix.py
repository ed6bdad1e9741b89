"""The committed compatibility matrix (docs/compatibility.md) is what a run measures now.

scripts/compatibility_matrix.sh --check runs the suite against the original and against ours
on every surface (stdio and HTTP, the model-backed profiles included) and fails when the page
states any of those columns' cells otherwise. The third-party ports' columns are not
re-measured here (installing and running them adds about 10 minutes); regenerate the page
with scripts/compatibility_matrix.sh when they change."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conformance.helpers import REPO


@pytest.mark.original
@pytest.mark.models
def test_committed_matrix_matches_a_fresh_run(
    original: tuple[str, list[str]], tmp_path: Path
) -> None:
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "compatibility_matrix.sh"), "--check", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    assert "docs/compatibility.md: matches for original 2.8.3, ours, --compat 2.8.3" in (
        proc.stdout
    )
