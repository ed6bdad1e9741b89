"""How scripts/test.sh spreads the tests over pytest-xdist workers (docs/decisions/0055).

`--dist loadfile` keeps a file's tests on one worker, so a module-scoped fixture (a server, an
indexed corpus) starts once, as it does without workers. The conformance suite passes are the
exception: each test is a pass of its own of up to two minutes, sharing nothing with its
neighbours but the session's reports (tests/conformance/passes.py), so each is a unit of its
own and goes to whichever worker is free. (`--dist loadgroup` with an `xdist_group` per
module would say the same with marks, but pytest 9.2's node ids no longer take xdist 3.8's
group suffix, so it silently groups nothing: pytest-xdist issue 1386.)

Units are handed out longest first, so the run ends on short ones and neither worker idles
while the other finishes a long one. xdist's own order (most tests first) put the suite
passes, one test each, at the very end of a 22-minute run. A unit's cost is its measured
seconds in `COST_S`, else a guess from its number of tests; the matrix check, which waits
for every pass's report, is handed out last.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

# Modules whose tests share no module-scoped fixture and may each run on any worker.
SPREAD_MODULES = (
    "tests/conformance/test_ours_suite.py",
    "tests/conformance/test_original_suite.py",
    "tests/conformance/test_compatibility_matrix.py",
)

# Handed out after every other unit: it reads the reports of all the passes.
LAST = "tests/conformance/test_compatibility_matrix.py::test_committed_matrix_matches_a_fresh_run"

_OURS = "tests/conformance/test_ours_suite.py::"
_ORIGINAL = "tests/conformance/test_original_suite.py::test_full_suite_passes_against_the_original"
# Wall seconds of the longest units, timed in one process (`-p no:xdist`, niced) on the
# two-core machine beside other sessions (a 1-minute load of 6 to 13; CONTRIBUTING.md, "CI's
# time"). Only their order matters; a unit not named here is guessed from its tests. A named
# unit that is no longer collected fails a unit test.
COST_S: dict[str, float] = {
    # the conformance suite passes (a server per case; PostgreSQL's as long as SQLite's)
    _OURS
    + "test_suite_passes_with_the_index_in_postgresql[ours-compat-postgres-compat-2.8.3]": 390,
    _ORIGINAL + "[original-2.8.3-models-local-models-stdio]": 375,  # embeds on Node first
    _ORIGINAL + "[original-2.8.3-default-stdio]": 280,
    _OURS + "test_full_suite_passes_against_our_server[ours-compat-compat-2.8.3-default]": 235,
    _OURS + "test_full_suite_passes_against_our_server[ours-spec-spec-default]": 165,
    _OURS + "test_suite_passes_with_the_index_in_postgresql[ours-spec-postgres-spec]": 160,
    _OURS + "test_full_suite_passes_against_our_server"
    "[ours-compat-models-compat-2.8.3-local-models]": 155,
    _OURS + "test_full_suite_passes_against_our_server[ours-spec-remote-spec-embedded]": 130,
    _OURS + "test_full_suite_passes_against_our_server[ours-spec-models-spec-embedded]": 85,
    _OURS + "test_full_suite_passes_against_our_server[ours-memorize-memorize-default]": 65,
    _OURS + "test_full_suite_passes_against_our_server[ours-ldims-ldims-default]": 45,
    _OURS + "test_suite_passes_with_the_index_in_postgresql[ours-ldims-postgres-ldims]": 40,
    _OURS + "test_suite_passes_with_the_index_in_postgresql[ours-projmem-postgres-projmem]": 35,
    _OURS + "test_full_suite_passes_against_our_server[ours-projmem-projmem-default]": 35,
    _OURS + "test_full_suite_passes_against_our_server[ours-spec-rooted-spec-rooted]": 35,
    _OURS + "test_http_suite_passes_against_our_server[ours-projmem-projmem-4]": 19,
    _OURS + "test_http_suite_passes_against_our_server[ours-memorize-memorize-4]": 12,
    _OURS + "test_http_suite_passes_against_our_server[ours-compat-compat-2.8.3-40]": 11,
    _OURS + "test_http_suite_passes_against_our_server[ours-ldims-ldims-4]": 11,
    _ORIGINAL + "[original-2.8.3-default-http]": 10,
    _OURS + "test_http_suite_passes_against_our_server[ours-spec-spec-4]": 9,
    # files of few tests but many seconds, which the guess would hand out among the last
    "tests/integration/test_model_cost.py": 128,  # gemma-3-270m samples 0.4 s a token
    "tests/conformance/test_distribution.py": 85,  # builds and installs the wheel
    "tests/e2e/test_crash_consistency.py": 82,
    "tests/integration/test_real_models_fallback.py": 74,
    "tests/e2e/test_concurrency.py": 52,
    "tests/e2e/test_official_mcp_suite.py": 50,
    "tests/conformance/test_original_scan_order.py": 34,
    "tests/conformance/test_broken_server.py": 33,
    "tests/integration/test_original_index_interop.py": 31,
    "tests/e2e/test_container_command.py": 26,
    "tests/e2e/test_config_edit_lock.py": 23,
    "tests/e2e/test_postgres.py": 21,
    "tests/e2e/test_http_inspector.py": 19,
    "tests/e2e/test_postgres_batch_kill.py": 18,
    "tests/e2e/test_config_sync.py": 17,
    "tests/e2e/test_index_locks.py": 16,
    "tests/e2e/test_memorize_sampling_timeout.py": 15,
}

# The guess for a unit not in COST_S, in seconds per test: a unit or contract test takes
# milliseconds, an end-to-end, integration or conformance test starts processes.
QUICK_TIERS = ("tests/unit/", "tests/contract/")
QUICK_TEST_S = 0.05
PROCESS_TEST_S = 2.0


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or itself in a spread module."""
    path = nodeid.split("::", 1)[0]
    return nodeid if path in SPREAD_MODULES else path


def cost_of(unit: str, tests: int) -> float:
    if unit in COST_S:
        return COST_S[unit]
    return tests * (QUICK_TEST_S if unit.startswith(QUICK_TIERS) else PROCESS_TEST_S)


def hand_out_order(units: Mapping[str, int]) -> list[str]:
    """The units (unit -> its number of tests) in the order workers get them: the costliest
    first, ties in collection order, the matrix check last."""
    return sorted(units, key=lambda unit: (unit == LAST, -cost_of(unit, units[unit])))


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's file scheduling with `scope_of` as its grouping and `hand_out_order` as its
    order."""
    from xdist.scheduler import LoadFileScheduling

    class CostOrderedLoadFileScheduling(LoadFileScheduling):  # type: ignore[misc]
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            # schedule() has filled the queue (in xdist's order) when it hands out the first
            # unit; a crashed worker's units rejoin it at the end, as xdist does.
            if not self.ordered:
                queue = self.workqueue
                order = hand_out_order({unit: len(tests) for unit, tests in queue.items()})
                self.workqueue = OrderedDict((unit, queue[unit]) for unit in order)
                self.ordered = True
            super()._assign_work_unit(node)

    return CostOrderedLoadFileScheduling(config, log)
