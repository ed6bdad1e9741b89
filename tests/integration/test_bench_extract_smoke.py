"""benchmarks/bench_extract.py still runs end to end (tiny sizes), so it cannot rot unseen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_extract_runs(tmp_path: Path) -> None:
    figures = tmp_path / "extract.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_extract", "--pages", "4", "--files", "2",
         "--runs", "1", "--json", str(figures)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "pypdfium2 (chosen)" in done.stdout and "MISSING" not in done.stdout, done.stdout
    data = json.loads(figures.read_text(encoding="utf-8"))
    assert data["pdf"]["pypdfium2 (chosen)"]["pages_per_s"] > 0
    assert data["docx"]["python-docx (chosen)"]["words_ok"]
    assert data["worker"]["docx_files_per_s"] > 0


def test_recall_against_docling_ground_truth_meets_its_targets() -> None:
    """benchmarks/bench_extract_recall.py exits 0 only at a mean word recall of 97 % and no
    file under 90 % over the docling files in fixtures/docling (REQ-EXTRACT-012)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_extract_recall"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "46 files: mean" in done.stdout, done.stdout
