"""`qmd session list|show|summarize`: the session use cases on the command line
(docs/spec/projmem.md, REQ-PROJMEM-SESSION-002..004)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_projmem_stdio import AUTH, COMPACTED, projmem_env
from tests.mcp_harness import REPO
from tests.projmem_fixtures import LONG_SESSION


def _qmd(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", *args],
        env=env,
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_session_commands(tmp_path: Path) -> None:
    env = projmem_env(tmp_path)
    listed = _qmd(env, "session", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert rows[0]["sessionId"] == AUTH and len(rows) == 4
    compacted = _qmd(env, "session", "list", "--status", "compacted")
    assert compacted.stdout.startswith(f"{COMPACTED}  compacted")
    page = _qmd(env, "session", "show", LONG_SESSION, "--from-turn", "299", "--max-turns", "5")
    assert page.returncode == 0
    assert "Turns: 300 (showing 299-300)" in page.stdout
    assert "--- Turn 300 [assistant] " in page.stdout and "Tools: Read" in page.stdout
    latest = _qmd(env, "session", "show")
    assert f"Session: {AUTH}" in latest.stdout
    missing = _qmd(env, "session", "show", "nope")
    assert missing.returncode == 1 and "Session not found: nope" in missing.stderr
    bad = _qmd(env, "session", "summarize", AUTH, "--overview", " ")
    assert bad.returncode == 1 and "overview must be a non-empty string" in bad.stderr
    summary = {
        "overview": "Rotation shipped.",
        "decisions": ["Revoke the family on reuse"],
        "outcomes": [],
        "openItems": ["Load test"],
        "tags": ["auth"],
    }
    saved = _qmd(env, "session", "summarize", AUTH, "--from-json", "-", stdin=json.dumps(summary))
    assert saved.returncode == 0, saved.stderr
    assert f"Exported to sessions/{AUTH}.md (collection sessions)" in saved.stdout
    found = _qmd(env, "search", "Revoke the family on reuse", "--json")
    assert f"qmd://sessions/{AUTH}.md" in found.stdout
    summarized = _qmd(env, "session", "list", "--summarized")
    assert summarized.stdout.startswith(f"{AUTH}  closed     summary: yes")
