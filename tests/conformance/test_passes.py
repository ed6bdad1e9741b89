"""tests/conformance/passes.py: a suite pass runs once a session, whoever asks for it first,
and every later ask (another test, another worker, the matrix check) reads its report."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from tests.conformance.passes import ensure_passes, suite_pass


class CountingRunner:
    """Stands in for `python -m conformance run`: writes the report the arguments name."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.runs: list[str] = []
        self.guard = threading.Lock()

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        impl = args[args.index("--impl") + 1]
        with self.guard:
            self.runs.append(f"{impl}.{args[args.index('--transport') + 1]}")
        time.sleep(self.seconds)
        report = {"summary": {"passed": 3, "failed": 0, "skipped": 0}, "results": []}
        Path(args[args.index("--report-json") + 1]).write_text(json.dumps(report))
        return subprocess.CompletedProcess(list(args), 0, f"{impl}: 3 passed\n", "")


def test_concurrent_asks_run_the_pass_once_and_all_read_its_report(tmp_path: Path) -> None:
    runner = CountingRunner(seconds=0.3)
    results = []

    def ask() -> None:
        results.append(suite_pass(tmp_path, "ours-spec", "http", run=runner))

    askers = [threading.Thread(target=ask) for _ in range(4)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join()
    assert runner.runs == ["ours-spec.http"]
    assert {r.returncode for r in results} == {0}
    assert all(r.report()["summary"]["passed"] == 3 for r in results)
    assert suite_pass(tmp_path, "ours-spec", "http", run=runner).stdout == "ours-spec: 3 passed\n"
    assert runner.runs == ["ours-spec.http"]


def test_the_matrix_runs_only_the_passes_no_test_ran(tmp_path: Path) -> None:
    runner = CountingRunner()
    suite_pass(tmp_path, "ours-compat", "stdio", run=runner)
    wanted = [("ours-compat", "stdio"), ("ours-compat", "http"), ("original-2.8.3", "stdio")]
    results = ensure_passes(tmp_path, wanted, run=runner)
    assert runner.runs == ["ours-compat.stdio", "ours-compat.http", "original-2.8.3.stdio"]
    assert [r.name for r in results] == [
        "ours-compat.stdio",
        "ours-compat.http",
        "original-2.8.3.stdio",
    ]
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [
        "original-2.8.3.stdio.json",
        "ours-compat.http.json",
        "ours-compat.stdio.json",
    ]
