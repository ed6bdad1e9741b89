"""qmd-conformance is a distribution of its own (ADR 0048): installed alone into a fresh
virtualenv, outside this checkout, it has its data and runs; the server's wheel leaves it out."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

from tests.conformance.helpers import HERE, REPO

# Nothing of this checkout may leak in through the test runner's own path.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=CLEAN_ENV,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_conformance_alone_in_a_fresh_venv_runs_with_its_own_data(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    _pip(python, "install", str(REPO / "conformance"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(env_dir / "bin" / "qmd-conformance"), *args],
            cwd=outside,
            capture_output=True,
            text=True,
            timeout=300,
            env=CLEAN_ENV,
        )

    # No server code comes with it, and the installed copy is the one that runs.
    probe = subprocess.run(
        [str(python), "-c", "import conformance, importlib.util as u; print(conformance.__file__,"
         " u.find_spec('adapters') is None, u.find_spec('domain') is None)"],
        cwd=outside, capture_output=True, text=True, timeout=60, env=CLEAN_ENV,
    )  # fmt: skip
    where, no_adapters, no_domain = probe.stdout.split()
    assert str(env_dir) in where and no_adapters == "True" and no_domain == "True"
    validate = run("validate")
    assert validate.returncode == 0 and validate.stdout.endswith(": ok\n"), validate.stderr
    # A run copies the fixtures shipped inside the package (there are none in `outside`).
    cases = tmp_path / "cases"
    cases.mkdir()
    case = {
        "id": "mini.tools",
        "title": "tools/list",
        "requirements": ["REQ-SPEC-RPC-003"],
        "surfaces": ["spec"],
        "fixture": "default",
        "eras": ["2025"],
        "transports": ["stdio"],
        "steps": [
            {
                "send": {"method": "tools/list"},
                "expect": {"match": [{"path": "$.result.tools[0].name", "equals": "echo"}]},
            }
        ],
    }
    (cases / "mini.tools.json").write_text(json.dumps(case))
    mini = shlex.join([sys.executable, str(HERE / "mini_server.py")])
    setup = 'test -f "$QMD_FIXTURE_ROOT/corpora/handbook/README.md"'
    done = run("run", "--server-cmd", mini, "--setup-cmd", setup, "--surface", "spec",
               "--cases-dir", str(cases))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().splitlines()[-1] == "1 passed, 0 failed, 0 skipped"


def test_the_server_wheel_does_not_ship_the_conformance_suite(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    _pip(env_dir / "bin" / "python", "wheel", "--no-deps", "-w", str(tmp_path), str(REPO))
    (wheel,) = tmp_path.glob("qmd_reference-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("adapters/") for n in names)
    assert not any(n.startswith("conformance/") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "qmd-conformance" not in zipfile.ZipFile(wheel).read(entry_points).decode()
