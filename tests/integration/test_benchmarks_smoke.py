"""The speed benchmark still runs end to end (ours only, tiny corpus), so it cannot rot unseen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_speed_runs_for_ours(tmp_path: Path) -> None:
    figures = tmp_path / "speed.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_speed",
            "--docs",
            "50",
            "--requests",
            "20",
            "--warmups",
            "2",
            "--ours-only",
            "--json",
            str(figures),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    out = done.stdout
    assert "QMD speed benchmark: 50 docs" in out
    for label in (
        "index: collection add (wall)",
        "search median",
        "search p99",
        "query lex median",
        "get median",
        "status median",
        "indexing no slower than the original",
        "search median at most half the original's",
    ):
        assert label in out, f"missing {label!r} in:\n{out}"
    assert "documents indexed: ours 50," in out
    data = json.loads(figures.read_text(encoding="utf-8"))
    spec = data["ours"]["servers"]["spec"]
    assert spec["search"]["n"] == 20
    assert spec["search"]["median_ms"] > 0
    assert spec["hits_per_query"] > 0
    assert data["original"] is None


def test_bench_http_runs_for_ours(tmp_path: Path) -> None:
    figures = tmp_path / "http.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_http",
            "--docs",
            "50",
            "--requests",
            "200",
            "--levels",
            "1,4",
            "--ours-only",
            "--no-slow",
            "--json",
            str(figures),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    data = json.loads(figures.read_text(encoding="utf-8"))
    for level in ("1", "4"):
        ours = data["levels"][level]["ours"]
        assert ours["requests"] == 200 and ours["errors"] == 0
        assert ours["throughput_rps"] > 0 and ours["p99_ms"] >= ours["p50_ms"] > 0
        assert set(ours["by_kind"]) == {"search", "get", "status", "rest"}
        assert ours["server_rss_mib"] > 0
