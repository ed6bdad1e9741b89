"""scripts/test.sh's worker scheduling: a file per worker, the conformance suite passes one
by one, the longest units first (tests/xdist_scheduling.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import xdist_scheduling
from tests.xdist_scheduling import (
    COST_S,
    LAST,
    PROCESS_TEST_S,
    QUICK_TEST_S,
    SPREAD_MODULES,
    cost_of,
    hand_out_order,
    scope_of,
)

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


class _Config:
    """What xdist's file scheduler reads of pytest's config: two workers, its default order."""

    class option:  # noqa: N801 (pytest's attribute name)
        loadscopereorder = True

    def getvalue(self, name: str) -> object:
        assert name == "tx"
        return ["2*popen"]


class _Worker:
    """A worker as the scheduler sees it: it is sent test indexes and, at the end, shutdown."""

    def __init__(self, name: str, sent: list[int]) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.queued: list[int] = []
        self.sent = sent  # every worker's, in the order the scheduler sent them
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.queued += indexes
        self.sent += indexes

    def shutdown(self) -> None:
        self.shutting_down = True


def _hand_out(collection: list[str]) -> list[str]:
    """The units in the order the scheduler hands them out to two workers, each finishing its
    tests one at a time, in turn."""
    scheduler = xdist_scheduling.make_scheduler(_Config(), None)
    sent: list[int] = []
    workers = [_Worker("gw0", sent), _Worker("gw1", sent)]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    done = dict.fromkeys((w.name for w in workers), 0)
    while not all(w.shutting_down and done[w.name] == len(w.queued) for w in workers):
        for worker in workers:
            if done[worker.name] < len(worker.queued):
                scheduler.mark_test_complete(worker, worker.queued[done[worker.name]])
                done[worker.name] += 1
    assert sorted(sent) == list(range(len(collection)))  # each test once
    return list(dict.fromkeys(scope_of(collection[i]) for i in sent))


POSTGRES_PASS = (
    "tests/conformance/test_ours_suite.py::test_suite_passes_with_the_index_in_postgresql"
    "[ours-compat-postgres-compat-2.8.3]"
)
SPEC_PASS = (
    "tests/conformance/test_ours_suite.py::test_full_suite_passes_against_our_server"
    "[ours-spec-spec-default]"
)


def test_the_longest_units_are_handed_out_first_and_the_matrix_check_last() -> None:
    """xdist's own order (most tests first) handed the one-test suite passes out last, so a run
    ended on passes of minutes; by cost they go first, and short files end the run."""
    many_quick = [f"tests/unit/test_many.py::test_{i}" for i in range(100)]
    few_quick = [f"tests/unit/test_few.py::test_{i}" for i in range(3)]
    two_slow = ["tests/e2e/test_two.py::test_0", "tests/e2e/test_two.py::test_1"]
    matrix_quick = "tests/conformance/test_compatibility_matrix.py::test_quick"
    collection = [*many_quick, *few_quick, *two_slow, SPEC_PASS, POSTGRES_PASS, matrix_quick, LAST]
    assert _hand_out(collection) == [
        POSTGRES_PASS,
        SPEC_PASS,
        "tests/unit/test_many.py",
        "tests/e2e/test_two.py",
        matrix_quick,
        "tests/unit/test_few.py",
        LAST,
    ]


def test_an_unmeasured_unit_is_guessed_from_its_tests_and_its_tier() -> None:
    units = {
        "tests/unit/a.py": 3,
        "tests/unit/b.py": 30,
        LAST: 1,
        "tests/e2e/c.py": 2,
        "tests/unit/d.py": 30,
    }
    order = ["tests/e2e/c.py", "tests/unit/b.py", "tests/unit/d.py", "tests/unit/a.py", LAST]
    assert hand_out_order(units) == order
    assert cost_of("tests/unit/a.py", 3) == 3 * QUICK_TEST_S
    assert cost_of("tests/e2e/c.py", 2) == 2 * PROCESS_TEST_S


@pytest.mark.slow  # collects the suite modules in a child pytest (a few seconds)
def test_every_unit_with_a_measured_cost_is_collected() -> None:
    """A renamed file or pass would keep its stale cost and lose its place in the order."""
    files = sorted({unit.split("::", 1)[0] for unit in [*COST_S, LAST]})
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    units = {scope_of(line.strip()) for line in proc.stdout.splitlines() if "::" in line}
    assert units, proc.stdout + proc.stderr
    assert sorted(set(COST_S) - units) == []
    assert LAST in units
