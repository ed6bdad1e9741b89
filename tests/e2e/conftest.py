"""Shared helpers for the end-to-end tests: an isolated home and a real `qmd` process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HANDBOOK = REPO / "fixtures" / "corpora" / "handbook"


def qmd_command() -> list[str]:
    """The installed `qmd` console script next to this interpreter, else `-m`."""
    script = Path(sys.executable).with_name("qmd")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "adapters.cli.main"]


@dataclass
class Qmd:
    """Runs `qmd` with every file it touches kept under `root`."""

    root: Path
    corpus: Path

    @property
    def db(self) -> Path:
        return self.root / "index.sqlite"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_"))}
        env.update(
            HOME=str(self.root / "home"),
            XDG_CACHE_HOME=str(self.root / "home" / ".cache"),
            XDG_CONFIG_HOME=str(self.root / "home" / ".config"),
            INDEX_PATH=str(self.db),
            QMD_CONFIG_DIR=str(self.config_dir),
            NO_COLOR="1",
        )
        env.update(extra)
        return env

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        command: Sequence[str] | None = None,
        timeout: float = 120,
        **env: str,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*(command or qmd_command()), *args],
            cwd=cwd or self.root,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *args: str, cwd: Path | None = None) -> str:
        done = self.run(*args, cwd=cwd)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout


def make_qmd(root: Path) -> Qmd:
    (root / "home").mkdir(parents=True)
    corpus = root / "handbook"
    shutil.copytree(HANDBOOK, corpus)
    return Qmd(root, corpus)


@pytest.fixture
def fresh(tmp_path: Path) -> Qmd:
    """A copy of the handbook corpus, not yet indexed."""
    return make_qmd(tmp_path)


@pytest.fixture
def added(fresh: Qmd) -> Qmd:
    """The handbook corpus indexed as collection `handbook` (mutable per test)."""
    fresh.ok("collection", "add", str(fresh.corpus), "--name", "handbook")
    return fresh


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Qmd:
    """One indexed handbook with the fixture contexts, for read-only tests."""
    qmd = make_qmd(tmp_path_factory.mktemp("cli-shared"))
    qmd.ok("collection", "add", str(qmd.corpus), "--name", "handbook")
    qmd.ok("context", "add", "/", "Fixture knowledge base for the QMD conformance suite")
    qmd.ok("context", "add", "qmd://handbook/", "Team handbook")
    qmd.ok("context", "add", "qmd://handbook/engineering/api", "HTTP API reference")
    return qmd
