"""Console, JSON and JUnit reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from conformance.runner import Outcome


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


def print_results(results: list[Result], out: TextIO, verbose: bool) -> None:
    for r in results:
        print(console_line(r), file=out)
        if r.status in ("fail", "stale") or (verbose and r.status == "xfail"):
            print(console_details(r), file=out)


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
                "failures": [
                    {
                        "step": f.step,
                        "label": f.label,
                        "message": f.message,
                        "path": f.difference.path if f.difference else None,
                        "expected": _jsonable(f.difference.expected) if f.difference else None,
                        "actual": _jsonable(f.difference.actual) if f.difference else None,
                        "note": f.difference.note if f.difference else None,
                    }
                    for f in o.failures
                ],
            }
        )
    return {**meta, "summary": summary(results), "results": items}


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
