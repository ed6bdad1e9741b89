"""Seed 003 §7.1: the LDIMS service is configured through `.env` (REQ-LDIMS-DEPLOY-004).
`qmd mcp --surface ldims` reads the working folder's `.env`; real environment variables win
over it, `--env-file` names another file instead, and other surfaces do not read it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.bootstrap import build_app
from tests.mcp_harness import REPO, StdioServer, fixture_env


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("dotenv")
    for n in range(4):
        (root / "docs").mkdir(exist_ok=True)
        (root / "docs" / f"d{n}.md").write_text(f"# Sales {n}\n\nsales notes {n}\n", "utf-8")
    env = fixture_env(root)
    env["PYTHONPATH"] = str(REPO)  # the service runs in another folder than the checkout
    app = build_app(env=env, with_models=False)
    try:
        app.collections.add(str(root / "docs"), "c", "**/*.md")
    finally:
        app.close()
    work = root / "service"
    work.mkdir()
    (work / ".env").write_text(
        "# the service's settings, as seed 003 configures them\n"
        "SEARCH_MAX_RESULTS_HARD_LIMIT=2\nLOG_LEVEL=INFO\n",
        encoding="utf-8",
    )
    return work, env


def _capped_at(work: Path, env: dict[str, str], *args: str) -> int:
    server = StdioServer(env, "--surface", "ldims", *args, cwd=work)
    try:
        server.initialize()
        result = server.call("searchDocuments", {"query": "sales", "maxResults": 10})
        payload = json.loads(result["content"][0]["text"])
        capped: int = payload["searchMetadata"]["maxResultsCappedAt"]
        assert len(payload["results"]) == capped
        return capped
    finally:
        server.kill()


def test_the_working_folders_env_configures_ldims(indexed: tuple[Path, dict[str, str]]) -> None:
    work, env = indexed
    assert _capped_at(work, env) == 2


def test_real_environment_wins_over_env(indexed: tuple[Path, dict[str, str]]) -> None:
    work, env = indexed
    assert _capped_at(work, {**env, "SEARCH_MAX_RESULTS_HARD_LIMIT": "1"}) == 1


def test_env_file_names_another_file(indexed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    work, env = indexed
    other = tmp_path / "other.env"
    other.write_text("SEARCH_MAX_RESULTS_HARD_LIMIT=3\n", encoding="utf-8")
    assert _capped_at(work, env, "--env-file", str(other)) == 3
    assert _capped_at(work, {**env, "QMD_ENV_FILE": str(other)}) == 3


def _start(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Start and end at once (stdin closed): exit 0 when the settings were accepted."""
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", "mcp", *args],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_only_ldims_reads_the_working_folders_env(
    indexed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    _work, env = indexed
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / ".env").write_text("SEARCH_MAX_RESULTS_HARD_LIMIT=zero\n", encoding="utf-8")
    ldims = _start(bad, env, "--surface", "ldims")
    assert ldims.returncode == 2
    assert "SEARCH_MAX_RESULTS_HARD_LIMIT='zero'" in ldims.stderr and ".env" in ldims.stderr
    assert _start(bad, env).returncode == 0  # the default surface ignores it
