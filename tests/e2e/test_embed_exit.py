"""`qmd embed` exits non-zero, saying so, when it leaves work undone (tobi/qmd #724, #935):
here, another embed holds the lock, so this run embeds nothing. (Failed and left-over
documents: tests/integration/test_embedding_index.py; kills: test_crash_consistency.py.)"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

from adapters.cli.runtime import lock_file_path
from tests.mcp_harness import REPO, fixture_env

EMBED_MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"


def test_embed_blocked_by_another_embed_fails_and_says_nothing_was_embedded(
    tmp_path: Path,
) -> None:
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("# a\nsome text\n")
    env = {**fixture_env(tmp_path), "PYTHONPATH": str(REPO), "QMD_EMBED_MODEL": str(EMBED_MODEL)}

    def qmd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "adapters.cli.main", *args],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    assert qmd("collection", "add", str(corpus), "--name", "c").returncode == 0
    lock = lock_file_path(env["INDEX_PATH"], "embed")  # the index's own lock (issue 26)
    with open(lock, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        blocked = qmd("embed")
    assert blocked.returncode == 1
    assert "Another embed process is already running; this run embedded nothing" in (blocked.stderr)
    assert "1 need embedding" in qmd("status").stdout
