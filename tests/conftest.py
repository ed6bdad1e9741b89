"""Suite-wide hooks. Kept light: every pytest run imports this file before anything else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import needs, xdist_scheduling


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
