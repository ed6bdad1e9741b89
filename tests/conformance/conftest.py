"""Fixtures for the conformance-suite tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import profiles
from tests.conformance.passes import session_folder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The matrix check last: by then the suite tests have written the reports it reads, so
    it runs no pass of its own (it would run a missing one: passes.ensure_passes). Under
    xdist it is then the last unit handed out, as the passes are units of one test."""
    readers = [i for i in items if i.path.name == MATRIX_TEST and "suite_reports" in fixtures(i)]
    items[:] = [i for i in items if i not in readers] + readers


def fixtures(item: pytest.Item) -> list[str]:
    return list(getattr(item, "fixturenames", ()))


MATRIX_TEST = "test_compatibility_matrix.py"


@pytest.fixture(scope="session")
def suite_reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of this session's suite-pass reports, shared by every xdist worker."""
    return session_folder(tmp_path_factory)


@pytest.fixture(scope="session")
def original() -> tuple[str, list[str]]:
    """(qmd executable, PATH dirs holding Node 22) of the original QMD 2.8.3.

    Missing is a failure, not a skip: CI has to install it first."""
    try:
        qmd, path_dirs = profiles.resolve_binary(profiles.load("original-2.8.3"), None)
    except FileNotFoundError as exc:
        pytest.fail(
            f"the original QMD 2.8.3 is not installed: run scripts/install_original.sh "
            f"(or set QMD_ORIGINAL_BIN and QMD_ORIGINAL_NODE). Details: {exc}"
        )
    assert qmd is not None
    return qmd, path_dirs
