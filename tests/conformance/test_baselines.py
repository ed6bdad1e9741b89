"""Baselines: unlisted failures fail, listed ones are expected, listed passes are stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import baselines
from conformance.cases import CaseError, load_cases

ENTRIES = [
    baselines.Entry("a.case", "2025", "known gap"),
    baselines.Entry("b.case", "all", "known everywhere"),
]


def test_unlisted_failure_fails() -> None:
    assert baselines.judge(ENTRIES, "c.case", "2025", passed=False).status == "fail"


def test_unlisted_pass_passes() -> None:
    assert baselines.judge(ENTRIES, "c.case", "2025", passed=True).status == "pass"


def test_listed_failure_is_expected_with_its_reason() -> None:
    verdict = baselines.judge(ENTRIES, "a.case", "2025", passed=False)
    assert verdict.status == "xfail" and verdict.reason == "known gap"


def test_listed_failure_in_another_era_is_not_covered() -> None:
    assert baselines.judge(ENTRIES, "a.case", "2026-07-28", passed=False).status == "fail"


def test_era_all_covers_every_era() -> None:
    assert baselines.judge(ENTRIES, "b.case", "2026-07-28", passed=False).status == "xfail"


def test_listed_case_that_passes_is_stale() -> None:
    verdict = baselines.judge(ENTRIES, "a.case", "2025", passed=True)
    assert verdict.status == "stale" and "remove it" in verdict.reason


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "b.yaml"
    path.write_text(text)
    return path


def test_load_valid_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "expected_failures:\n  - {case: ping, era: '2025', reason: why}\n")
    assert baselines.load(path, ["ping"]) == [baselines.Entry("ping", "2025", "why")]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("expected_failures:\n  - {case: nope, era: all, reason: r}\n", "unknown case"),
        ("expected_failures:\n  - {case: ping, era: '2024', reason: r}\n", "era must be"),
        ("expected_failures:\n  - {case: ping, era: all, reason: ''}\n", "reason"),
        ("expected_failures:\n  - {case: ping, era: all}\n", "exactly"),
        (
            "expected_failures:\n  - {case: ping, era: all, reason: a}\n"
            "  - {case: ping, era: all, reason: b}\n",
            "duplicates",
        ),
        ("other: []\n", "one key"),
    ],
)
def test_load_rejects_bad_entries(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(CaseError, match=fragment):
        baselines.load(_write(tmp_path, text), ["ping"])


def test_shipped_baselines_name_real_cases() -> None:
    ids = [c.id for c in load_cases()]
    shipped = Path(baselines.__file__).parent / "baselines"
    files = sorted(shipped.glob("*.yaml"))
    assert files
    for path in files:
        for entry in baselines.load(path, ids):
            assert entry.reason
