"""The trust gate holds for `qmd mcp --watch` and its start-up catch-up (REQ-SEC-SCOPE-002,
issue 22 finding 3): an unapproved project-local `.qmd/index.yml` naming a folder outside the
project gets that folder neither indexed nor served, by the watching server or, afterwards,
by plain `qmd search`. Real processes; polled with a deadline, never a fixed sleep."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.mcp_harness import StdioServer, fixture_env

DEADLINE_S = 30.0
SECRET = "zebraprivate"


def _eventually(found: Callable[[], bool], what: str) -> None:
    began = time.monotonic()
    while time.monotonic() - began < DEADLINE_S:
        if found():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not seen within {DEADLINE_S} s")


def _files(server: StdioServer, word: str) -> list[str]:
    result = server.call("search", {"query": word, "limit": 50, "minScore": 0}, timeout=60)
    return [item["file"] for item in result.get("structuredContent", {}).get("results", [])]


def test_watch_never_indexes_an_untrusted_outside_collection(tmp_path: Path) -> None:
    project, private = tmp_path / "project", tmp_path / "private"
    (project / "docs").mkdir(parents=True)
    (project / ".qmd").mkdir()
    private.mkdir()
    (project / "docs" / "a.md").write_text("# A\n\nThe lighthouse keeper's notes.\n")
    (private / "diary.md").write_text(f"# Diary\n\nMy {SECRET} thoughts.\n")
    (project / ".qmd" / "index.yml").write_text(
        "collections:\n"
        f"  docs:\n    path: {project / 'docs'}\n    pattern: '**/*.md'\n"
        f"  private:\n    path: {private}\n    pattern: '**/*.md'\n"
    )
    env = {k: v for k, v in fixture_env(tmp_path).items() if k != "INDEX_PATH"}

    def qmd(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "adapters.cli.main", *args],
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    assert "Skipping collection 'private'" in qmd("update")  # the gate, as before
    server = StdioServer(env, "--watch", cwd=project)
    try:
        server.initialize()
        # a change outside while serving, and two inside: once the second inside change is
        # indexed, the catch-up pass and the pass after it have both run
        (private / "later.md").write_text(f"# Later\n\n{SECRET} again.\n")
        for number, word in enumerate(("quokkawatch", "marmosetwatch"), start=1):
            (project / "docs" / f"new{number}.md").write_text(f"# New\n\n{word}\n")
            _eventually(lambda w=word: bool(_files(server, w)), f"the inside file {word}")  # type: ignore[misc]
        assert _files(server, SECRET) == []
        assert _files(server, "thoughts") == []
    finally:
        server.kill()
    # and plain commands do not serve it afterwards either
    assert SECRET not in qmd("search", SECRET, "--json", "-n", "50")
    listed = json.loads(qmd("search", "lighthouse", "--json", "-n", "50"))
    assert any("a.md" in hit["file"] for hit in listed), listed
