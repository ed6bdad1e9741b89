"""Console, JSON and JUnit reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from conformance import requirements
from conformance.compare import window
from conformance.runner import Failure, Outcome


@dataclass
class Result:
    outcome: Outcome
    status: str  # pass | fail | xfail | stale
    reason: str = ""

    @property
    def counted_as(self) -> str:
        # The summary has three counters; an expected (baselined) failure is reported as
        # skipped with its reason, a stale baseline entry as a failure.
        return {"pass": "passed", "fail": "failed", "stale": "failed", "xfail": "skipped"}[
            self.status
        ]


def summary(results: list[Result]) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for r in results:
        counts[r.counted_as] += 1
    return counts


def summary_line(results: list[Result]) -> str:
    c = summary(results)
    return f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"


_TAGS = {"pass": "PASS ", "fail": "FAIL ", "xfail": "XFAIL", "stale": "STALE"}


def console_line(r: Result) -> str:
    o = r.outcome
    line = f"{_TAGS[r.status]} {o.case.id} [{o.era}] ({o.seconds * 1000:.0f} ms)"
    if r.status == "xfail":
        line += f" - expected failure: {r.reason}"
    return line


def console_details(r: Result) -> str:
    o = r.outcome
    if r.status == "stale":
        return f"  {o.case.id} [{o.era}]: {r.reason}"
    lines = [f"  case {o.case.id}, era {o.era}, requirements {', '.join(o.case.requirements)}"]
    for f in o.failures:
        lines.append("  " + f.render().replace("\n", "\n  "))
    if o.stderr_tail.strip():
        tail = o.stderr_tail.strip().splitlines()[-8:]
        lines.append("  server stderr (last lines):\n    " + "\n    ".join(tail))
    return "\n".join(lines)


def print_results(
    results: list[Result], out: TextIO, verbose: bool, areas_only: bool = False
) -> None:
    """One line per case and era with the details of each failure, then the failures grouped
    by root cause; `areas_only` (--summary): one line per requirement area instead."""
    if areas_only:
        for line in area_lines(results):
            print(line, file=out)
    else:
        for r in results:
            print(console_line(r), file=out)
            if r.status in ("fail", "stale") or (verbose and r.status == "xfail"):
                print(console_details(r), file=out)
    causes = root_causes(results)
    if causes:
        print(f"Failures by root cause ({len(causes)}; same JSON path, same kind):", file=out)
        for cause in causes:
            shown = ", ".join(cause["examples"])
            more = cause["runs"] - len(cause["examples"])
            shown += f", … {more} more" if more > 0 else ""
            print(
                f"  {cause['runs']:4d} run(s)  {cause['path']}: {cause['kind']}  ({shown})",
                file=out,
            )


def root_causes(results: list[Result], examples: int = 3) -> list[dict[str, Any]]:
    """Failing case/era runs grouped by (JSON path with [*] for indexes, kind of difference),
    largest group first: one defect of a port usually fails many cases at one place."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in results:
        if r.status != "fail":
            continue
        o = r.outcome
        for key in dict.fromkeys(f.root_cause for f in o.failures):
            groups.setdefault(key, []).append(f"{o.case.id} [{o.era}]")
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    return [
        {"path": path, "kind": kind, "runs": len(runs), "examples": runs[:examples]}
        for (path, kind), runs in ordered
    ]


def area_lines(results: list[Result]) -> list[str]:
    """One line per requirement area (a docs/spec section) the runs cite: requirements
    passed / checked, and case/era runs passed / run."""
    reqs = requirements.load()
    areas: dict[str, dict[str, Any]] = {}
    for r in results:
        ok = r.status == "pass"
        for req_id in r.outcome.case.requirements:
            req = reqs.get(req_id)
            name = f"{req.doc}: {req.section}" if req else "(unknown requirement)"
            area = areas.setdefault(name, {"reqs": {}, "runs": [0, 0]})
            area["reqs"][req_id] = area["reqs"].get(req_id, True) and ok
    for r in results:
        for name in {
            f"{reqs[q].doc}: {reqs[q].section}" if q in reqs else "(unknown requirement)"
            for q in r.outcome.case.requirements
        }:
            areas[name]["runs"][0] += r.status == "pass"
            areas[name]["runs"][1] += 1
    lines = []
    for name, area in sorted(areas.items()):
        verdicts = area["reqs"].values()
        passed, total = sum(verdicts), len(verdicts)
        mark = "PASS " if passed == total else "FAIL "
        lines.append(
            f"{mark} {name}: {passed}/{total} requirements, "
            f"{area['runs'][0]}/{area['runs'][1]} runs"
        )
    return lines


def to_json(results: list[Result], meta: dict[str, Any]) -> dict[str, Any]:
    items = []
    for r in results:
        o = r.outcome
        items.append(
            {
                "case": o.case.id,
                "era": o.era,
                "status": r.status,
                "reason": r.reason,
                "requirements": list(o.case.requirements),
                "seconds": round(o.seconds, 3),
                "failures": [_failure_json(f) for f in o.failures],
            }
        )
    return {
        **meta,
        "summary": summary(results),
        "root_causes": root_causes(results),
        "results": items,
    }


def _failure_json(f: Failure) -> dict[str, Any]:
    d = f.difference
    item: dict[str, Any] = {
        "step": f.step,
        "label": f.label,
        "message": f.message,
        "path": d.path if d else None,
        "expected": _jsonable(d.expected) if d else None,
        "actual": _jsonable(d.actual) if d else None,
        "note": d.note if d else None,
        "requirements": list(f.requirements),
        "root_cause": list(f.root_cause),
    }
    if d is not None and d.at is not None:
        item["around"] = {
            "at": d.at,
            "expected": window(d.expected, d.at),
            "actual": window(d.actual, d.at),
        }
    return item


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def write_json(path: Path, results: list[Result], meta: dict[str, Any]) -> None:
    path.write_text(
        json.dumps(to_json(results, meta), ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )


def write_junit(path: Path, results: list[Result], suite_name: str) -> None:
    c = summary(results)
    total_time = sum(r.outcome.seconds for r in results)
    suite = ET.Element(
        "testsuite",
        name=suite_name,
        tests=str(len(results)),
        failures=str(c["failed"]),
        skipped=str(c["skipped"]),
        errors="0",
        time=f"{total_time:.3f}",
    )
    for r in results:
        o = r.outcome
        tc = ET.SubElement(
            suite,
            "testcase",
            classname=f"{suite_name}.{o.era}",
            name=o.case.id,
            time=f"{o.seconds:.3f}",
        )
        if r.status in ("fail", "stale"):
            first = o.failures[0].render().splitlines()[0] if o.failures else r.reason
            node = ET.SubElement(tc, "failure", message=first[:300])
            node.text = console_details(r)
        elif r.status == "xfail":
            ET.SubElement(tc, "skipped", message=f"expected failure: {r.reason}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
