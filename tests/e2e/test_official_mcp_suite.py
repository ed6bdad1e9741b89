"""The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
scripts/install_mcp_conformance.sh) against every surface of ours over HTTP.

Every failing check must be listed, with its reason, in
tests/data/official-mcp-suite/expected-failures.yaml; a new failure, or a listed one that now
passes, fails the test. Missing Node or the suite is a failure too: CI installs both
(scripts/setup.sh)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.helpers import REPO

SCRIPT = REPO / "scripts" / "official_mcp_suite.py"
EXPECTED = REPO / "tests" / "data" / "official-mcp-suite" / "expected-failures.yaml"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.official_suite
@pytest.mark.models  # the memorize surface embeds with the MiniLM GGUF
@pytest.mark.parametrize("surface", ["default", "compat-2.8.3", "memorize", "projmem", "ldims"])
def test_official_suite_fails_only_where_expected(surface: str, tmp_path: Path) -> None:
    report = tmp_path / "judged.json"
    proc = _run("--surface", surface, "--json", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (judged,) = json.loads(report.read_text())
    # the suite really ran its scenarios against the server
    assert judged["summary"].startswith("Total: ") and "passed" in judged["summary"]
    passed = int(judged["summary"].split()[1])
    assert passed >= 100, judged["summary"]
    assert judged["unexpected"] == {} and judged["stale"] == []


@pytest.mark.official_suite
def test_a_failure_not_in_the_expected_list_fails_the_run(tmp_path: Path) -> None:
    # Drop one entry that every surface needs: the run must name it as a new failure.
    text = EXPECTED.read_text(encoding="utf-8")
    entry = "  - check: completion-complete:completion-complete\n    reason: not-declared\n"
    assert entry in text
    trimmed = tmp_path / "expected.yaml"
    trimmed.write_text(text.replace(entry, ""), encoding="utf-8")
    proc = _run("--surface", "ldims", "--expected", str(trimmed))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NEW FAILURE completion-complete:completion-complete" in proc.stdout
