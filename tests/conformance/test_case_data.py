"""Case files: every shipped case validates, and invalid case data is rejected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conformance.cases import CaseError, load_cases, load_schema, validate_case_data


def _case(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "demo.case",
        "title": "demo",
        "requirements": ["REQ-MCP-PING-001"],
        "surfaces": ["compat-2.8.3"],
        "fixture": "default",
        "eras": ["2025"],
        "transports": ["stdio"],
        "steps": [{"send": {"method": "ping"}, "expect": {"golden": True}}],
    }
    base.update(over)
    return base


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(load_schema())


def test_every_shipped_case_validates() -> None:
    cases = load_cases()
    assert len(cases) >= 100
    assert len({c.id for c in cases}) == len(cases)


def test_a_valid_case_loads() -> None:
    case = validate_case_data(_case(), Path("demo.case.json"))
    assert case.uses_golden and case.eras == ("2025",)


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"requirements": []}, "requirements"),
        ({"requirements": ["TOOL-1"]}, "does not match"),
        ({"eras": ["2024"]}, "eras"),
        ({"surfaces": ["other"]}, "surfaces"),
        ({"transports": ["smtp"]}, "transports"),
        ({"transports": ["http"]}, "http steps are for http cases"),
        ({"transports": ["stdio", "http"]}, "runs on the http transport only"),
        ({"fixture": "vectors"}, "fixture"),
        ({"steps": [{"send": {"method": "ping"}}]}, "expect"),
        (
            {"steps": [{"send": {"method": "ping"}, "raw": "x", "expect": {"golden": True}}]},
            "steps/0",
        ),
        (
            {"steps": [{"send": {"method": "ping"}, "expect": {"match": [{"path": "x"}]}}]},
            "steps/0",
        ),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_schema_rejects(override: dict[str, Any], fragment: str) -> None:
    with pytest.raises(CaseError, match=fragment):
        validate_case_data(_case(**override), Path("demo.case.json"))


def test_golden_expectations_are_only_for_the_compat_surface() -> None:
    with pytest.raises(CaseError, match="golden"):
        validate_case_data(_case(surfaces=["spec"]), Path("demo.case.json"))


def test_goldens_are_not_recorded_on_the_any_model_embedded_fixture() -> None:
    with pytest.raises(CaseError, match="default, local-models or real-models fixture"):
        validate_case_data(_case(fixture="embedded"), Path("demo.case.json"))
    validate_case_data(_case(fixture="local-models"), Path("demo.case.json"))
    validate_case_data(_case(fixture="real-models"), Path("demo.case.json"))


def test_file_name_must_match_the_id() -> None:
    with pytest.raises(CaseError, match="file name"):
        validate_case_data(_case(), Path("other.json"))


def test_requests_cannot_expect_silence() -> None:
    steps = [{"send": {"method": "ping"}, "expect": {"noReplyWithinMs": 100}}]
    with pytest.raises(CaseError, match="notify/raw"):
        validate_case_data(_case(steps=steps), Path("demo.case.json"))


def test_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for sub in ("a", "b"):
        (tmp_path / sub / "demo.case.json").write_text(json.dumps(_case()))
    with pytest.raises(CaseError, match="duplicate"):
        load_cases(tmp_path)


def test_broken_json_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(CaseError, match="not JSON"):
        load_cases(tmp_path)
