"""Loading and validating case files (JSON data, checked against the shipped schema)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

ERAS = ("2025", "2026-07-28")
SURFACES = ("compat-2.8.3", "spec", "ldims", "memorize", "projmem")
# default: the index fixtures/setup.json describes; embedded: the same index after the
# implementation computed its embeddings (vector search and hybrid query have data);
# rooted: the default index served with `--force-root` on the handbook folder, so the
# archive collection lies outside the permitted root;
# local-models: the same index embedded with the two local GGUF files of the model-backed
# goldens (MiniLM embedder; gemma-3-270m as reranker and generator), for the original and ours;
# real-models: the same index, less setup.json's `leave_out` files, embedded with the real set
# (EmbeddingGemma-300M embedder, Qwen2.5-Coder-1.5B as reranker and generator): the original's
# own default embedding path
FIXTURES = ("default", "embedded", "rooted", "local-models", "real-models")
# the fixtures whose setup ends with the implementation's embedding step
EMBEDDED_FIXTURES = frozenset({"embedded", "local-models", "real-models"})
# the fixtures that need the real model set (scripts/prepare_models.py --set real)
REAL_MODEL_FIXTURES = frozenset({"real-models"})


class CaseError(ValueError):
    """Case data is invalid (exit code 4)."""


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    requirements: tuple[str, ...]
    surfaces: tuple[str, ...]
    eras: tuple[str, ...]
    transports: tuple[str, ...]
    fixture: str
    handshake: bool
    steps: tuple[dict[str, Any], ...]
    source: Path

    @property
    def uses_golden(self) -> bool:
        return any(s["expect"].get("golden") for s in self.steps)


def package_dir() -> Path:
    return Path(str(resources.files("conformance")))


def default_cases_dir() -> Path:
    return package_dir() / "cases"


def load_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((package_dir() / "schema" / "case.schema.json").read_text())
    return data


@functools.cache
def validator() -> jsonschema.Draft202012Validator:
    # Built once: compiling the schema per case made loading ~150 cases take seconds.
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def validate_case_data(data: Any, source: Path) -> Case:
    errors = sorted(validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [
            f"{source}: {'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in errors[:10]
        ]
        raise CaseError("\n".join(lines))
    steps = tuple(data["steps"])
    surfaces = tuple(data["surfaces"])
    case = Case(
        id=data["id"],
        title=data["title"],
        requirements=tuple(data["requirements"]),
        surfaces=surfaces,
        eras=tuple(data["eras"]),
        transports=tuple(data["transports"]),
        fixture=data["fixture"],
        handshake=data.get("handshake", True),
        steps=steps,
        source=source,
    )
    # Rules the schema cannot express.
    if source.stem != case.id:
        raise CaseError(f"{source}: file name must be <id>.json (id is {case.id!r})")
    if case.uses_golden and surfaces != ("compat-2.8.3",):
        raise CaseError(f"{source}: golden expectations only exist for the compat-2.8.3 surface")
    if case.uses_golden and case.fixture == "embedded":
        # each port embeds with its own model there; goldens need the original's own models
        raise CaseError(
            f"{source}: goldens are recorded on the default, local-models or real-models fixture"
        )
    http = case.transports == ("http",)
    if "http" in case.transports and not http:
        raise CaseError(f"{source}: an http case runs on the http transport only")
    for n, step in enumerate(steps):
        if ("http" in step) != http:
            raise CaseError(
                f"{source}: step {n}: http steps are for http cases, and only http steps"
            )
        if "handshake" in step and (n != 0 or not case.handshake):
            raise CaseError(
                f"{source}: a handshake step must be the first step of a case whose handshake is on"
            )
        kind = "send" if "send" in step else "other"
        exp = step["expect"]
        if kind == "send" and ("quietMs" in exp or "noReplyWithinMs" in exp):
            raise CaseError(
                f"{source}: step {n}: requests always wait for their reply; "
                "use notify/raw for no-reply expectations"
            )
        if "envelope" in step and "send" not in step and "notify" not in step:
            raise CaseError(f"{source}: step {n}: envelope only applies to send/notify")
    return case


def load_cases(directory: Path | None = None) -> list[Case]:
    directory = directory or default_cases_dir()
    cases: list[Case] = []
    seen: dict[str, Path] = {}
    for path in sorted(directory.rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise CaseError(f"{path}: not JSON: {exc}") from exc
        case = validate_case_data(data, path)
        if case.id in seen:
            raise CaseError(f"{path}: duplicate case id {case.id!r} (also {seen[case.id]})")
        seen[case.id] = path
        cases.append(case)
    if not cases:
        raise CaseError(f"no cases under {directory}")
    return sorted(cases, key=lambda c: c.id)
