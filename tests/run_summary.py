"""Lines a test adds to the end of the pytest run, under a section title: the real-model
goldens' comparison, the robustness tests' figures (tried inputs, kills, requests).

A line travels as a user property of the test's report, the one thing pytest-xdist ships from
the worker that ran the test to the controller, which alone prints the summary (CI runs with
`-n`: scripts/test.sh, scripts/real_tier.sh); a module-level list would fill in the worker and
print nothing. tests/conftest.py attaches the lines to the reports, collects them and prints
them, under `-q` too, whether the tests pass or fail.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

# A user property named PREFIX + section title holds one line of that section.
PREFIX = "run summary: "

# Lines reported by the running test and not yet attached to one of its reports.
_pending: list[tuple[str, str]] = []


def report(section: str, line: str) -> None:
    """Print `line` now (seen with `-s`) and list it under `section` at the end of the run."""
    text = line.strip()
    print("\n" + text)
    _pending.append((section, text))


def attach_pending(item: pytest.Item) -> None:
    """Hand the reported lines to `item`, whose next report (and every later one) carries them."""
    item.user_properties.extend((PREFIX + section, text) for section, text in _pending)
    _pending.clear()


class Summary:
    """The lines collected from the reports, by section, each once, first seen first."""

    def __init__(self) -> None:
        self._sections: dict[str, dict[str, None]] = {}

    def collect(self, properties: Iterable[tuple[str, object]]) -> None:
        # a test's setup, call and teardown reports each carry its lines so far: kept once
        for name, value in properties:
            if name.startswith(PREFIX):
                self._sections.setdefault(name.removeprefix(PREFIX), {})[str(value)] = None

    def write(self, terminalreporter: pytest.TerminalReporter) -> None:
        for section, lines in self._sections.items():
            terminalreporter.section(section)
            for line in lines:
                terminalreporter.write_line(line)
