"""A compatibility matrix (implementations × requirement areas) from JSON run reports.

Each column is one implementation, fed by one or more `qmd-conformance run --report-json`
files (e.g. its default-fixture and its local-models run). A row is a section of docs/spec
(`conformance/requirements.json`). A cell counts the requirements of that section the column's
runs checked, and how many of them passed in every case and era that cites them; a baseline's
expected failure is a known divergence, not a pass.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.requirements import Requirement


@dataclass
class Column:
    label: str
    reports: list[dict[str, Any]] = field(default_factory=list)

    def verdicts(self) -> dict[str, bool]:
        """Requirement id -> whether every run citing it passed."""
        out: dict[str, bool] = {}
        for report in self.reports:
            for result in report["results"]:
                ok = result["status"] == "pass"
                for req in result["requirements"]:
                    out[req] = out.get(req, True) and ok
        return out

    def runs(self) -> tuple[int, int]:
        results = [r for report in self.reports for r in report["results"]]
        return sum(r["status"] == "pass" for r in results), len(results)


def parse_report_options(options: Sequence[str]) -> list[tuple[str, Path]]:
    """`LABEL=PATH` options, in order."""
    out = []
    for option in options:
        label, sep, path = option.partition("=")
        if not sep or not label.strip() or not path:
            raise ValueError(f"--report wants LABEL=PATH, got {option!r}")
        out.append((label.strip(), Path(path)))
    return out


def load_columns(pairs: Sequence[tuple[str, Path]]) -> list[Column]:
    columns: dict[str, Column] = {}
    for label, path in pairs:
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable JSON report ({exc})") from exc
        if not isinstance(report, dict) or "results" not in report:
            raise ValueError(f"{path}: not a qmd-conformance JSON report (no results)")
        columns.setdefault(label, Column(label)).reports.append(report)
    return list(columns.values())


def _cell(ids: list[str], verdicts: dict[str, bool]) -> str:
    checked = [i for i in ids if i in verdicts]
    if not checked:
        return "—"
    passed = sum(verdicts[i] for i in checked)
    mark = "✅" if passed == len(checked) else ("❌" if passed == 0 else "◐")
    return f"{mark} {passed}/{len(checked)}"


def _setup_note(failure: dict[str, Any]) -> str:
    """Which step failed and why; not the command line, which names the scratch folder."""
    reason = str(failure.get("reason", "")).strip().splitlines()
    return (
        f"step {failure.get('step')}/{failure.get('total')} ({failure.get('kind')}): "
        f"`{reason[0] if reason else 'failed'}`"
    )


def render(columns: Sequence[Column], requirements: dict[str, Requirement], command: str) -> str:
    sections: dict[tuple[str, str], list[str]] = {}
    for req in requirements.values():
        if req.deferred is None:
            sections.setdefault((req.doc, req.section), []).append(req.id)
    verdicts = [c.verdicts() for c in columns]
    lines = [
        "# Compatibility matrix",
        "",
        "Which implementation meets which part of the behaviour specification (`docs/spec/`),",
        "as the conformance suite measured it. Generated, do not edit by hand:",
        "",
        "```sh",
        command,
        "```",
        "",
        "A cell is *requirements passed / requirements checked* for that section: a requirement",
        "passes when every case and era citing it passed (a baselined expected failure does",
        "not). `—`: the column's runs check nothing there (compat sections for the default",
        "surface and the reverse; no vector cases for a port without embeddings).",
        "",
        "| area (docs/spec) | " + " | ".join(c.label for c in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for (doc, section), ids in sorted(sections.items()):
        cells = [_cell(ids, v) for v in verdicts]
        lines.append(f"| {doc}: {section} | " + " | ".join(cells) + " |")
    totals = []
    for column, v in zip(columns, verdicts, strict=True):
        passed_runs, runs = column.runs()
        totals.append(f"{sum(v.values())}/{len(v)} req, {passed_runs}/{runs} runs")
    lines.append("| **all** | " + " | ".join(f"**{t}**" for t in totals) + " |")
    lines += [
        "",
        "## Runs",
        "",
        "| column | profile | surface | date | setup |",
        "|---|---|---|---|---|",
    ]
    for column in columns:
        for report in column.reports:
            failures = report.get("setup_failures") or []
            setup = f"{len(failures)} step(s) failed" if failures else "ok"
            lines.append(
                f"| {column.label} | `{report.get('implementation', '?')}` | "
                f"{report.get('surface', '?')} | {report.get('date', '?')} | {setup} |"
            )
    notes = [
        (column.label, failure)
        for column in columns
        for report in column.reports
        for failure in report.get("setup_failures") or []
    ]
    if notes:
        lines += ["", "Setup steps that failed (the cases ran anyway):", ""]
        lines += [f"* {label}: {_setup_note(failure)}" for label, failure in notes]
    lines += ["", "## Pass counts and top root causes", ""]
    lines += [
        "Case/era runs passed per column, and its largest groups of failures (same JSON path,",
        "same kind of difference; `qmd-conformance run` prints them after the cases).",
        "",
    ]
    for column in columns:
        lines += _column_causes(column)
    deferred = [r for r in requirements.values() if r.deferred is not None]
    lines += ["", "## Not checked (deferred requirements)", ""]
    lines += [f"* **{r.id}** ({r.doc}): {r.deferred}" for r in sorted(deferred, key=lambda r: r.id)]
    return "\n".join(lines) + "\n"


TOP_CAUSES = 5


def _column_causes(column: Column) -> list[str]:
    passed, runs = column.runs()
    head = f"* **{column.label}**: {passed}/{runs} runs passed"
    fallbacks = sorted({r["era_fallback"] for r in column.reports if r.get("era_fallback")})
    if fallbacks:
        head += " (" + "; ".join(f.split(" (")[0] for f in fallbacks) + ")"
    merged: dict[tuple[str, str], int] = {}
    for report in column.reports:
        for cause in report.get("root_causes") or []:
            key = (str(cause["path"]), str(cause["kind"]))
            merged[key] = merged.get(key, 0) + int(cause["runs"])
    if not merged:
        return [head + "."]
    top = sorted(merged.items(), key=lambda item: (-item[1], item[0]))[:TOP_CAUSES]
    out = [head + "; top root causes:"]
    out += [f"  {n}. `{path}`: {kind} ({count} runs)" for n, ((path, kind), count) in
            enumerate(top, start=1)]  # fmt: skip
    return out


def table_cells(text: str) -> dict[tuple[str, str], str]:
    """(row, column label) -> cell of a matrix page's main table."""
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    if not rows or not rows[0].startswith("| area (docs/spec) |"):
        return {}
    labels = [c.strip() for c in rows[0].strip("|").split("|")][1:]
    cells: dict[tuple[str, str], str] = {}
    for row in rows[1:]:
        parts = [c.strip() for c in row.strip("|").split("|")]
        if parts[0] in ("column",) or parts[0].startswith("---"):
            break  # the next table (runs)
        for label, cell in zip(labels, parts[1:], strict=False):
            cells[(parts[0], label)] = cell
    return cells


def check(committed: str, fresh: str) -> list[str]:
    """Cells of the freshly measured columns that the committed page states differently
    (columns the fresh run does not measure, e.g. third-party ports, are not compared)."""
    old, new = table_cells(committed), table_cells(fresh)
    measured = {label for _row, label in new}
    problems = []
    for (row, label), cell in sorted(new.items()):
        if old.get((row, label)) != cell:
            was = old.get((row, label), "<no such cell>")
            problems.append(f"{label} / {row}: committed {was!r}, measured {cell!r}")
    problems += [
        f"{label} / {row}: committed {cell!r}, not measured now"
        for (row, label), cell in sorted(old.items())
        if label in measured and (row, label) not in new
    ]
    return problems
