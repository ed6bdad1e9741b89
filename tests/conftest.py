"""Suite-wide hooks. Kept light: every pytest run imports this file before anything else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import needs, run_summary, xdist_scheduling

# Lines tests reported for the end of the run (tests/run_summary.py), from every worker.
_SUMMARY = run_summary.Summary()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for marker in sorted(needs.markers_for(item)):
            if item.get_closest_marker(marker) is None:
                item.add_marker(marker)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # a hook of pytest-xdist, when installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` (scripts/test.sh), but the conformance suite passes one by one and
    the longest units first."""
    if config.getvalue("dist") != "loadfile":
        return None
    return xdist_scheduling.make_scheduler(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    needs.enter(item)
    try:
        return (yield)
    finally:
        needs.leave(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    needs.tearing_down(True)
    try:
        return (yield)
    finally:
        needs.tearing_down(False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[pytest.TestReport]:
    # before the report is made: it copies the item's user properties
    run_summary.attach_pending(item)
    return (yield)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Called in the process that prints the summary, with the reports of every xdist worker."""
    _SUMMARY.collect(report.user_properties)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    _SUMMARY.write(terminalreporter)
