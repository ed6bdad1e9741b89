"""Requirement coverage: every active requirement has a case; every cited ID exists."""

from __future__ import annotations

from collections import Counter

from conformance import goldens, requirements
from conformance.cases import ERAS, load_cases


def test_every_active_requirement_has_a_case() -> None:
    cited = {r for c in load_cases() for r in c.requirements}
    uncovered = sorted(
        k for k, v in requirements.load().items() if not v.deferred and k not in cited
    )
    assert uncovered == [], f"requirements without a case: {uncovered}"


def test_cases_cite_only_known_active_requirements() -> None:
    reqs = requirements.load()
    bad = [
        (c.id, r) for c in load_cases() for r in c.requirements if r not in reqs or reqs[r].deferred
    ]
    assert bad == [], f"unknown or deferred requirement IDs cited: {bad}"


def test_a_case_only_cites_requirements_of_its_surface() -> None:
    reqs = requirements.load()
    bad = [
        (c.id, r)
        for c in load_cases()
        for r in c.requirements
        if r in reqs and not set(c.surfaces) & set(reqs[r].surfaces)
    ]
    assert bad == []


def test_deferred_requirements_give_a_reason() -> None:
    deferred = [r for r in requirements.load().values() if r.deferred is not None]
    assert deferred, "model-backed behaviour must be written down as deferred"
    assert all(len(r.deferred or "") > 10 for r in deferred)


def test_at_least_80_compat_cases_run_in_both_eras() -> None:
    both = [c for c in load_cases() if "compat-2.8.3" in c.surfaces and set(c.eras) == set(ERAS)]
    assert len(both) >= 80


def test_every_golden_case_has_a_canonical_golden_per_era() -> None:
    missing, noncanonical = [], []
    for case in load_cases():
        if not case.uses_golden:
            continue
        for era in case.eras:
            path = goldens.golden_path("original-2.8.3", era, case.id)
            if not path.is_file():
                missing.append(f"{era}/{case.id}")
            elif not goldens.is_canonical(path):
                noncanonical.append(f"{era}/{case.id}")
    assert missing == [], f"record these: {missing}"
    assert noncanonical == []


def test_no_orphan_goldens() -> None:
    ids = {c.id for c in load_cases()}
    root = goldens.goldens_root()
    orphans = [str(p.relative_to(root)) for p in root.rglob("*.json") if p.stem not in ids]
    assert orphans == []


def test_goldens_carry_provenance() -> None:
    versions: Counter[str] = Counter()
    for path in goldens.goldens_root().rglob("*.json"):
        prov = goldens.read(path)["provenance"]
        assert {"implementation", "version", "date", "node"} <= set(prov)
        versions[prov["version"]] += 1
    assert list(versions) == ["qmd 2.8.3 (facd35e)"]
