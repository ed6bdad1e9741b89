"""The robustness tests' figures (counts of tried inputs, kills, requests), listed at the end of
a pytest run under "robustness figures", without `-s` and from xdist workers too
(tests/run_summary.py)."""

from __future__ import annotations

from tests import run_summary

SECTION = "robustness figures"


def report(line: str) -> None:
    """Print one figure now (visible with -s) and list it at the end of the run."""
    run_summary.report(SECTION, line)
