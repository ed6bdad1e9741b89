"""How scripts/test.sh spreads the tests over pytest-xdist workers (docs/decisions/0055).

`--dist loadfile` keeps a file's tests on one worker, so a module-scoped fixture (a server, an
indexed corpus) starts once, as it does without workers. The conformance suite passes are the
exception: each test is a pass of its own of up to two minutes, sharing nothing with its
neighbours but the session's reports (tests/conformance/passes.py), so each is a unit of its
own and goes to whichever worker is free. (`--dist loadgroup` with an `xdist_group` per
module would say the same with marks, but pytest 9.2's node ids no longer take xdist 3.8's
group suffix, so it silently groups nothing: pytest-xdist issue 1386.)
"""

from __future__ import annotations

from typing import Any

# Modules whose tests share no module-scoped fixture and may each run on any worker.
SPREAD_MODULES = (
    "tests/conformance/test_ours_suite.py",
    "tests/conformance/test_original_suite.py",
    "tests/conformance/test_compatibility_matrix.py",
)


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or itself in a spread module."""
    path = nodeid.split("::", 1)[0]
    return nodeid if path in SPREAD_MODULES else path


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's file scheduling with `scope_of` as its grouping."""
    from xdist.scheduler import LoadFileScheduling

    class SpreadLoadFileScheduling(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return SpreadLoadFileScheduling(config, log)
