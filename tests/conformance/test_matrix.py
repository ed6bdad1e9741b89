"""`qmd-conformance matrix`: implementations × requirement areas from JSON run reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conformance.helpers import run_cli


def _report(path: Path, impl: str, results: list[tuple[str, str, list[str]]], **meta: Any) -> str:
    data = {
        "implementation": impl,
        "surface": "compat-2.8.3",
        "date": "2026-11-23T10:00:00+00:00",
        **meta,
        "results": [
            {"case": case, "era": "2025", "status": status, "requirements": reqs}
            for case, status, reqs in results
        ],
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_matrix_merges_reports_per_column_and_counts_requirements(tmp_path: Path) -> None:
    ping, init = "REQ-MCP-PING-001", "REQ-MCP-INIT-001"  # both: "2025 era" section
    vec = "REQ-SEARCH-VEC-001"  # "Model-backed search (compat)"
    a1 = _report(tmp_path / "a1.json", "a", [("p", "pass", [ping]), ("i", "pass", [init])])
    a2 = _report(tmp_path / "a2.json", "a-models", [("v", "pass", [vec])])
    b = _report(
        tmp_path / "b.json",
        "b",
        [("p", "pass", [ping]), ("i", "fail", [init]), ("i2", "pass", [init])],
        setup_failures=[
            {
                "step": 3,
                "total": 8,
                "kind": "context",
                "command": "/scratch/b context add / x",
                "reason": "exited 1: Path is not in any indexed collection: /\nmore",
            }
        ],
    )
    notes = tmp_path / "notes.md"
    notes.write_text("## Notes\n\nhand-written\n", encoding="utf-8")
    out = tmp_path / "matrix.md"
    proc = run_cli(
        "matrix",
        "--report",
        f"impl A={a1}",
        "--report",
        f"impl A={a2}",
        "--report",
        f"impl B={b}",
        "--notes",
        str(notes),
        "--made-by",
        "make-it.sh",
        "--out",
        str(out),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text(encoding="utf-8")
    assert "| area (docs/spec) | impl A | impl B |" in text
    assert "| mcp-protocol.md: 2025 era (initialize handshake) | ✅ 2/2 | ◐ 1/2 |" in text
    assert "| search.md: Model-backed search (compat) | ✅ 1/1 | — |" in text
    assert "| **all** | **3/3 req, 3/3 runs** | **1/2 req, 2/3 runs** |" in text
    assert "| impl A | `a-models` | compat-2.8.3 |" in text
    assert (
        "* impl B: step 3/8 (context): `exited 1: Path is not in any indexed collection: /`" in text
    )
    assert "/scratch" not in text  # the command line names a scratch folder: left out
    assert "make-it.sh" in text and text.endswith("hand-written\n")
    assert "**REQ-SEARCH-EXPAND-002**" in text  # deferred requirements say why


def test_matrix_rejects_a_file_that_is_not_a_report(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    proc = run_cli("matrix", "--report", f"X={bad}", timeout=60)
    assert proc.returncode == 2 and "not a qmd-conformance JSON report" in proc.stderr
    proc = run_cli("matrix", "--report", "no-label", timeout=60)
    assert proc.returncode == 2 and "LABEL=PATH" in proc.stderr


def test_matrix_lists_pass_counts_and_top_root_causes_per_column(tmp_path: Path) -> None:
    causes = [{"path": "$.result.isError", "kind": "unexpected", "runs": 2, "examples": []}]
    port = _report(
        tmp_path / "p.json",
        "port",
        [("p", "fail", ["REQ-MCP-PING-001"]), ("i", "pass", ["REQ-MCP-INIT-001"])],
        root_causes=causes,
        era_fallback="era 2025 only: the 2026-07-28 handshake failed (…); 3 runs not run",
    )
    proc = run_cli("matrix", "--report", f"port 1.0={port}", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "* **port 1.0**: 1/2 runs passed (era 2025 only: the 2026-07-28 handshake failed)" in (
        proc.stdout
    )
    assert "  1. `$.result.isError`: unexpected (2 runs)" in proc.stdout


def test_matrix_check_compares_only_the_measured_columns(tmp_path: Path) -> None:
    ping = "REQ-MCP-PING-001"
    ours = _report(tmp_path / "o.json", "ours", [("p", "pass", [ping])])
    port = _report(tmp_path / "p.json", "port", [("p", "fail", [ping])])
    page = tmp_path / "matrix.md"
    made = run_cli("matrix", "--report", f"ours={ours}", "--report", f"port={port}",
                   "--out", str(page), timeout=60)  # fmt: skip
    assert made.returncode == 0, made.stderr
    # A fresh run of ours alone matches the committed page (the port is not re-measured).
    same = run_cli("matrix", "--report", f"ours={ours}", "--check", str(page), timeout=60)
    assert same.returncode == 0, same.stderr
    assert "matches for ours" in same.stdout
    # ours regressed: the check names the cell that changed.
    worse = _report(tmp_path / "w.json", "ours", [("p", "fail", [ping])])
    differs = run_cli("matrix", "--report", f"ours={worse}", "--check", str(page), timeout=60)
    assert differs.returncode == 1
    assert "ours / mcp-protocol.md: 2025 era (initialize handshake): committed '✅ 1/1', " in (
        differs.stderr
    )
