"""What a test needs from outside a bare `pip install -e '.[dev]'`, and the marker that says so.

A bare dev install runs `pytest -m "not models and not original and not postgres and not
node"` and must stay green, and a default set-up (the stand-in models only) runs
`-m "not real_models"`, so every test that reaches for llama.cpp and the prepared models,
the original QMD, the local PostgreSQL or an npm tool on Node must carry the marker. Two ways
keep that true without anyone remembering it:

- `tests/conftest.py` adds the marker from what a test visibly uses (a fixture, a parameter);
- the helpers that hand out those things call `require(...)`, which fails a running test
  that lacks the marker, so a full run (CI) finds a missing marker the day it is written.
"""

from __future__ import annotations

import re

import pytest

# Fixtures that bring the thing up, by name, and the marker their users need.
FIXTURE_MARKERS = {
    "model_server": "models",  # tests/remote_servers.py: llama-cpp-python's server on .models/
    "shim": "models",
    "original": "original",  # tests/conformance/conftest.py: the original's launcher
}
# A string parameter with this word in it (`postgres`, `markdown-postgres`) runs the test
# against that backend (the contract tests).
PARAM_MARKERS = {"postgres": "postgres"}
# Markers that imply another: the official suite runs on Node; the real model set
# (`prepare_models.py --set real`, opt-in) is a set of prepared models.
IMPLIED_MARKERS = {"official_suite": "node", "real_models": "models"}

_running: list[pytest.Item] = []
# A shared fixture's clean-up runs in the teardown of whichever test came last, a test that
# may never have used it; its use was checked when it was set up, so teardowns are not.
_tearing_down: list[bool] = [False]


def markers_for(item: pytest.Item) -> set[str]:
    """The markers `item` needs from what it declares using."""
    fixtures = getattr(item, "fixturenames", ())
    wanted = {FIXTURE_MARKERS[name] for name in fixtures if name in FIXTURE_MARKERS}
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for value in callspec.params.values():
            if isinstance(value, str):
                words = re.split(r"[^a-z0-9]+", value.lower())
                wanted |= {marker for word, marker in PARAM_MARKERS.items() if word in words}
    for marker, implied in IMPLIED_MARKERS.items():
        if item.get_closest_marker(marker) is not None:
            wanted.add(implied)
    return wanted


def enter(item: pytest.Item) -> None:
    _running.append(item)


def leave(item: pytest.Item) -> None:
    if _running and _running[-1] is item:
        _running.pop()


def tearing_down(now: bool) -> None:
    _tearing_down[0] = now


def require(marker: str, what: str) -> None:
    """Fail the running test unless it carries `marker`: it is about to use `what`."""
    if not _running or _tearing_down[0]:
        return  # outside a test (a script importing the helper), or a fixture's clean-up
    item = _running[-1]
    if item.get_closest_marker(marker) is None:
        pytest.fail(
            f"{item.nodeid} uses {what} but is not marked `{marker}`: add "
            f"@pytest.mark.{marker} (or pytestmark) so a bare dev install can deselect it",
            pytrace=False,
        )
