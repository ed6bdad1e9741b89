"""conformance/requirements.json is generated from docs/spec and must not drift."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conformance.helpers import REPO


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_requirements", REPO / "scripts" / "gen_requirements.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_requirements"] = module
    spec.loader.exec_module(module)
    return module


def test_requirements_json_matches_docs_spec() -> None:
    gen = _generator()
    shipped = (REPO / "conformance" / "requirements.json").read_text(encoding="utf-8")
    assert gen.render(gen.collect()) == shipped, "run scripts/gen_requirements.py"


def test_generator_parses_tags_and_continuations(tmp_path: Path) -> None:
    gen = _generator()
    (tmp_path / "a.md").write_text(
        "# A\n\n## Things\n\n"
        "- **REQ-X-ONE-001** [compat, spec] First line\n  continued.\n"
        "- **REQ-X-TWO-002** [spec; deferred: needs a model; later] Text.\n"
        "- plain bullet\n\n```\n- **REQ-NOT-A-REQ-001** [compat] example\n```\n"
    )
    reqs = {r["id"]: r for r in gen.collect(tmp_path)["requirements"]}
    assert set(reqs) == {"REQ-X-ONE-001", "REQ-X-TWO-002"}
    assert reqs["REQ-X-ONE-001"]["text"] == "First line continued."
    assert reqs["REQ-X-ONE-001"]["surfaces"] == ["compat-2.8.3", "spec"]
    assert reqs["REQ-X-ONE-001"]["section"] == "Things"
    assert reqs["REQ-X-TWO-002"]["deferred"] == "needs a model; later"


@pytest.mark.parametrize(
    "bullet",
    [
        "- **REQ-X-ONE-001** [bogus] text",
        "- **REQ-X-ONE-001** text without tags",
        "- **REQ-X-ONE-001** [compat] a\n- **REQ-X-ONE-001** [compat] b",
    ],
)
def test_generator_rejects_bad_bullets(tmp_path: Path, bullet: str) -> None:
    gen = _generator()
    (tmp_path / "a.md").write_text(bullet + "\n")
    with pytest.raises(gen.SpecError):
        gen.collect(tmp_path)
