"""Expected-failure baselines: known, documented divergences of one implementation.

A listed failure that passes again is an error too (stale entry), so a baseline can only
shrink as an implementation improves and never hides a fixed bug's regression.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from conformance.cases import ERAS, CaseError


@dataclass(frozen=True)
class Entry:
    case: str
    era: str  # one of ERAS, or "all"
    reason: str

    def covers(self, case_id: str, era: str) -> bool:
        return self.case == case_id and self.era in ("all", era)


@dataclass(frozen=True)
class Verdict:
    status: str  # pass | fail | xfail | stale
    reason: str = ""


def load(path: Path | None, known_cases: Iterable[str]) -> list[Entry]:
    if path is None:
        return []
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CaseError(f"{path}: cannot read baseline: {exc}") from exc
    if data is None:
        return []
    if not isinstance(data, dict) or set(data) - {"expected_failures"}:
        raise CaseError(f"{path}: expected a mapping with one key, expected_failures")
    raw = data.get("expected_failures") or []
    if not isinstance(raw, list):
        raise CaseError(f"{path}: expected_failures must be a list")
    known = set(known_cases)
    entries: list[Entry] = []
    seen: set[tuple[str, str]] = set()
    for n, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) != {"case", "era", "reason"}:
            raise CaseError(f"{path}: entry {n} must have exactly case, era and reason")
        case, era, reason = str(item["case"]), str(item["era"]), str(item["reason"]).strip()
        if case not in known:
            raise CaseError(f"{path}: entry {n} names unknown case {case!r}")
        if era not in (*ERAS, "all"):
            raise CaseError(f"{path}: entry {n}: era must be one of {ERAS} or 'all'")
        if not reason:
            raise CaseError(f"{path}: entry {n}: a reason is required")
        if (case, era) in seen:
            raise CaseError(f"{path}: entry {n} duplicates {case} / {era}")
        seen.add((case, era))
        entries.append(Entry(case, era, reason))
    return entries


def judge(entries: list[Entry], case_id: str, era: str, passed: bool) -> Verdict:
    listed = next((e for e in entries if e.covers(case_id, era)), None)
    if listed is None:
        return Verdict("pass" if passed else "fail")
    if passed:
        return Verdict(
            "stale",
            f"listed as expected failure ({listed.reason}) but passes: remove it from the baseline",
        )
    return Verdict("xfail", listed.reason)
