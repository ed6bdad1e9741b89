"""Fixtures for the conformance-suite tests."""

from __future__ import annotations

import pytest

from conformance import profiles


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
