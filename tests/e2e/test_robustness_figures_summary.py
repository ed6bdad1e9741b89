"""The figures the robustness tests report (tried inputs, kills, requests) are listed once at
the end of the run under "robustness figures", from xdist workers as CI runs them
(scripts/test.sh: `-n`) and without xdist, under `-q`, whether the tests pass or fail
(tests/run_summary.py): they are what shows a CI log that those tests did real work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import nested_pytest

pytestmark = [pytest.mark.slow]

WORKERS = {"xdist": ("-n", "2"), "no-xdist": ("-p", "no:xdist")}
# two robustness tests of a few seconds in all, each reporting one figure
CJK_QUERIES = ("tests/e2e/test_hostile_corpus.py", "-k", "cjk_query")


def _without_numbers(lines: list[str]) -> list[str]:
    return sorted(re.sub(r"\d+ KiB", "N KiB", line) for line in lines)


@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS)
def test_the_figures_of_a_run_are_listed_once(workers: tuple[str, ...]) -> None:
    done = nested_pytest.run(*CJK_QUERIES, *workers)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = nested_pytest.sections(done.stdout, "robustness figures")
    assert len(listed) == 1, done.stdout
    assert _without_numbers(listed[0]) == [
        "1 MB CJK query on ('--compat', '2.8.3'): refused, server peak RSS N KiB",
        "1 MB CJK query on spec: refused, server peak RSS N KiB",
    ], done.stdout


@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS)
def test_a_failing_test_s_figures_are_listed_too(tmp_path: Path, workers: tuple[str, ...]) -> None:
    # a test folder of its own (its rootdir), running the suite's hooks
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.conftest"]\n', "utf-8")
    (tmp_path / "test_fails.py").write_text(
        "from tests.figures import report\n\n\n"
        "def test_reports_then_fails() -> None:\n"
        '    report("3 inputs tried before the failure")\n'
        "    assert False\n",
        encoding="utf-8",
    )
    done = nested_pytest.run(str(tmp_path), *workers)
    assert done.returncode == 1, done.stdout + done.stderr
    listed = nested_pytest.sections(done.stdout, "robustness figures")
    assert listed == [["3 inputs tried before the failure"]], done.stdout
