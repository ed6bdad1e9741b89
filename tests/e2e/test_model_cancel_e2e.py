"""A `query` past its time limit stops its model work (REQ-SEARCH-CANCEL-MODEL-001), seen from
outside: a real `qmd mcp` process with the project's small GGUF models, whose query expansion
(gemma-3-270m, up to 600 tokens) takes far longer than the limit on a CPU. After the timeout
error the server's CPU time must stop growing; before, the expansion ran on to its end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mcp_harness import REPO, StdioServer, build_fixture_index

pytestmark = pytest.mark.models

MODELS = REPO / ".models"
EMBED_MODEL = MODELS / "all-MiniLM-L6-v2-f16.gguf"
SMALL_LLM = MODELS / "gemma-3-270m-q4_k_m.gguf"
LIMIT_S = 3
QUIET_WINDOW_S = 3.0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def test_a_query_past_its_time_limit_stops_generating(tmp_path: Path) -> None:
    missing = [p.name for p in (EMBED_MODEL, SMALL_LLM) if not p.is_file()]
    if missing:
        pytest.fail(f"test models missing ({missing}); run: python scripts/prepare_models.py")
    _, env = build_fixture_index(tmp_path)
    env = {
        **env,
        "QMD_EMBED_MODEL": str(EMBED_MODEL),
        "QMD_RERANK_MODEL": str(SMALL_LLM),
        "QMD_GENERATE_MODEL": str(SMALL_LLM),
        "QMD_EXPAND_MAX_TOKENS": "600",
    }
    # vectors first: without them the search would be keyword-only, with no expansion
    embedded = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", "embed"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert embedded.returncode == 0, embedded.stderr
    server = StdioServer(env, "--request-timeout", str(LIMIT_S))
    try:
        server.initialize()
        # a question the keyword index answers weakly, so the search expands it
        reply = server.request(
            "tools/call",
            {"name": "query", "arguments": {"query": "why do migrating zebras cross rivers"}},
            timeout=60,
        )
        assert "error" in reply and reply["error"]["code"] == -32001, reply
        time.sleep(1.0)  # the next token, the worker's unwinding
        before = _cpu_seconds(server.process.pid)
        time.sleep(QUIET_WINDOW_S)
        spent = _cpu_seconds(server.process.pid) - before
        assert spent < 0.5, f"the server kept computing: {spent:.2f} s CPU in {QUIET_WINDOW_S} s"
        # and it still answers
        assert server.call("status", {})["structuredContent"]["totalDocuments"] > 0
    finally:
        server.kill()
