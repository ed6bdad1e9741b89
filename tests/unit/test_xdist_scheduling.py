"""scripts/test.sh's worker scheduling: a file per worker, the conformance suite passes one
by one (tests/xdist_scheduling.py)."""

from __future__ import annotations

from pathlib import Path

from tests.xdist_scheduling import SPREAD_MODULES, scope_of

REPO = Path(__file__).resolve().parents[2]


def test_a_file_is_one_unit_and_a_suite_pass_is_one_of_its_own() -> None:
    assert scope_of("tests/e2e/test_mcp_stdio.py::test_x[a::b]") == "tests/e2e/test_mcp_stdio.py"
    assert scope_of("tests/e2e/test_mcp_stdio.py::C::test_y") == "tests/e2e/test_mcp_stdio.py"
    one = "tests/conformance/test_ours_suite.py::test_full_suite_passes_against_our_server[x]"
    other = "tests/conformance/test_ours_suite.py::test_full_suite_passes_against_our_server[y]"
    assert scope_of(one) == one
    assert scope_of(other) == other


def test_every_spread_module_exists() -> None:
    """A renamed suite module would silently fall back to one worker for all its passes."""
    assert [m for m in SPREAD_MODULES if not (REPO / m).is_file()] == []
