"""A one-character defect in one answer of the real original server must fail the run."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.conformance.helpers import HERE, REPO, run_cli


def _setup_script(qmd: str, path_dirs: list[str]) -> str:
    """The fixture setup as one shell line, as a port author would pass to --setup-cmd."""
    setup = json.loads((REPO / "fixtures" / "setup.json").read_text())
    q = shlex.quote(qmd)
    lines = [f"export PATH={shlex.quote(':'.join(path_dirs))}:$PATH"]
    for c in setup["collections"]:
        lines.append(
            f'{q} collection add "$QMD_FIXTURE_ROOT"/{shlex.quote(c["path"])} '
            f"--name {shlex.quote(c['name'])} --mask {shlex.quote(c['mask'])}"
        )
    for ctx in setup["contexts"]:
        lines.append(f"{q} context add {shlex.quote(ctx['target'])} {shlex.quote(ctx['text'])}")
    for name in setup["exclude"]:
        lines.append(f"{q} collection exclude {shlex.quote(name)}")
    return " && ".join(lines)


@pytest.mark.original
def test_runner_catches_one_changed_character(
    original: tuple[str, list[str]], tmp_path: Path
) -> None:
    qmd, path_dirs = original
    proxy = [
        sys.executable,
        str(HERE / "broken_server.py"),
        "--path-prepend",
        ":".join(path_dirs),
        "--",
        qmd,
        "mcp",
    ]
    report = tmp_path / "report.json"
    proc = run_cli(
        "run",
        "--server-cmd",
        shlex.join(proxy),
        "--setup-cmd",
        _setup_script(qmd, path_dirs),
        "--case",
        "query.lex",
        "--case",
        "ping",
        "--report-json",
        str(report),
        "--report-junit",
        str(tmp_path / "j.xml"),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "FAIL  query.lex [2025]" in out and "FAIL  query.lex [2026-07-28]" in out
    assert "PASS  ping [2025]" in out
    assert "$.result.content[0].text" in out
    assert '"Fount 3 results' in out and '"Found 3 results' in out
    assert out.rstrip().splitlines()[-1] == "2 passed, 2 failed, 0 skipped"
    data = json.loads(report.read_text())
    failed = [r for r in data["results"] if r["status"] == "fail"]
    assert {r["case"] for r in failed} == {"query.lex"}
    assert [f["path"] for f in failed[0]["failures"]] == ["$.result.content[0].text"]
    assert "query.lex" in (tmp_path / "j.xml").read_text()


@pytest.mark.original
def test_the_unbroken_proxy_passes(original: tuple[str, list[str]]) -> None:
    """Control: the same setup through --server-cmd passes when nothing is changed."""
    qmd, path_dirs = original
    server = shlex.join(["env", f"PATH={':'.join(path_dirs)}:/usr/bin:/bin", qmd, "mcp"])
    proc = run_cli(
        "run",
        "--server-cmd",
        server,
        "--setup-cmd",
        _setup_script(qmd, path_dirs),
        "--case",
        "query.lex",
        "--case",
        "status",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().splitlines()[-1] == "4 passed, 0 failed, 0 skipped"
