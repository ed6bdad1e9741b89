"""Suite passes run once per test session, their reports kept in one session folder.

A pass is one `qmd-conformance run` of one implementation profile over one transport. The
suite tests (test_ours_suite.py, test_original_suite.py) assert on a pass's summary, and the
matrix check (test_compatibility_matrix.py) builds its columns from the same reports, so each
pass has to run once however pytest orders or spreads the tests: whoever asks first runs it
under a lock on its name, and every later ask, from any xdist worker, reads what it left.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.helpers import REPO, run_cli

MATRIX_SCRIPT = REPO / "scripts" / "compatibility_matrix.sh"
# How a pass's command line runs: `run_cli` (a `python -m conformance` child); tests of this
# module pass a stand-in that writes a report without starting servers.
Runner = Callable[..., subprocess.CompletedProcess[str]]


def session_folder(factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this session shares: under xdist each worker's base temp
    is `<the controller's base temp>/popen-gwN`, so the reports live one level up."""
    base = factory.getbasetemp()
    root = base.parent if base.name.startswith("popen-gw") else base
    folder = root / "conformance-reports"
    folder.mkdir(exist_ok=True)
    return folder


@dataclass(frozen=True)
class PassResult:
    name: str
    returncode: int
    output: str  # stdout, then stderr: what a failing assertion shows
    stdout: str
    report_path: Path
    junit_path: Path

    def report(self) -> dict[str, Any]:
        assert self.report_path.is_file(), f"pass {self.name} wrote no report:\n{self.output}"
        data: dict[str, Any] = json.loads(self.report_path.read_text(encoding="utf-8"))
        return data


def pass_name(impl: str, transport: str) -> str:
    """`<impl>.<transport>`: the file stem scripts/compatibility_matrix.sh reads."""
    return f"{impl}.{transport}"


@contextlib.contextmanager
def _locked(folder: Path, name: str, wait: bool) -> Iterator[bool]:
    with open(folder / f"{name}.lock", "a", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _load(folder: Path, name: str) -> PassResult | None:
    done = folder / f"{name}.rc"  # written last: its presence means the pass finished
    if not done.is_file():
        return None
    stdout = (folder / f"{name}.out").read_text(encoding="utf-8")
    stderr = (folder / f"{name}.err").read_text(encoding="utf-8")
    return PassResult(
        name,
        int(done.read_text(encoding="utf-8")),
        stdout[-6000:] + stderr[-2000:],
        stdout,
        folder / f"{name}.json",
        folder / f"{name}.xml",
    )


def _run(folder: Path, impl: str, transport: str, qmd_bin: str | None, run: Runner) -> PassResult:
    name = pass_name(impl, transport)
    # The arguments scripts/compatibility_matrix.sh gives a pass, so its report is the one
    # the script would have written.
    args = ["run", "--impl", impl, "--transport", transport, "--timeout", "120"]
    if qmd_bin is not None:
        args += ["--qmd-bin", qmd_bin]
    args += ["--report-json", str(folder / f"{name}.json")]
    args += ["--report-junit", str(folder / f"{name}.xml")]
    proc = run(*args)
    (folder / f"{name}.out").write_text(proc.stdout, encoding="utf-8")
    (folder / f"{name}.err").write_text(proc.stderr, encoding="utf-8")
    tmp = folder / f"{name}.rc.tmp"
    tmp.write_text(str(proc.returncode), encoding="utf-8")
    tmp.rename(folder / f"{name}.rc")
    result = _load(folder, name)
    assert result is not None
    return result


def suite_pass(
    folder: Path,
    impl: str,
    transport: str = "stdio",
    qmd_bin: str | None = None,
    run: Runner = run_cli,
) -> PassResult:
    """The pass's result: run now, or read from the session folder when it already ran."""
    name = pass_name(impl, transport)
    with _locked(folder, name, wait=True):
        return _load(folder, name) or _run(folder, impl, transport, qmd_bin, run)


def ensure_passes(
    folder: Path, wanted: list[tuple[str, str]], run: Runner = run_cli
) -> list[PassResult]:
    """Every wanted pass, run here when no test ran it. Passes another worker is running are
    waited for last, so two workers never run one pass and neither idles while work is left."""
    results: dict[tuple[str, str], PassResult] = {}
    busy = []
    for impl, transport in wanted:
        name = pass_name(impl, transport)
        with _locked(folder, name, wait=False) as held:
            if not held:
                busy.append((impl, transport))
                continue
            results[(impl, transport)] = _load(folder, name) or _run(
                folder, impl, transport, None, run
            )
    for impl, transport in busy:
        results[(impl, transport)] = suite_pass(folder, impl, transport, run=run)
    return [results[key] for key in wanted]


def matrix_passes() -> list[tuple[str, str]]:
    """(impl, transport) of every pass the matrix check reads, as the script lists them."""
    proc = subprocess.run(
        ["bash", str(MATRIX_SCRIPT), "--list"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    passes = [tuple(line.split()) for line in proc.stdout.splitlines() if line.strip()]
    assert passes and all(len(p) == 2 for p in passes), proc.stdout
    return [(p[0], p[1]) for p in passes]
