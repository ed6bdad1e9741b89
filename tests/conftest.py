"""Suite-wide hooks. Kept light: every pytest run imports this file before anything else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import needs, xdist_scheduling
from tooling import llama_build

# Lines tests recorded for the run's summary (pytest_terminal_summary below), first seen first.
_SUMMARY_LINES: dict[str, None] = {}


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


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep the real-model goldens' line (which build, which comparison). A test records it as
    a user property: the report carries it from an xdist worker to this process, which alone
    prints the summary, and `-q` keeps the summary."""
    for name, value in report.user_properties:
        if name == llama_build.REPORT_PROPERTY:
            _SUMMARY_LINES[str(value)] = None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _SUMMARY_LINES:
        terminalreporter.write_line(line)
