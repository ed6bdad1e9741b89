"""The machine-readable requirement list shipped with the package (generated from docs/spec)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from conformance.cases import package_dir


@dataclass(frozen=True)
class Requirement:
    id: str
    doc: str
    section: str
    text: str
    surfaces: tuple[str, ...]
    deferred: str | None  # reason, when the behaviour is not testable yet


def load() -> dict[str, Requirement]:
    data = json.loads((package_dir() / "requirements.json").read_text(encoding="utf-8"))
    out: dict[str, Requirement] = {}
    for item in data["requirements"]:
        out[item["id"]] = Requirement(
            id=item["id"],
            doc=item["doc"],
            section=item["section"],
            text=item["text"],
            surfaces=tuple(item["surfaces"]),
            deferred=item.get("deferred"),
        )
    return out
