"""Golden transcripts: canonical JSON (RFC 8785) with provenance, one file per case and era."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import rfc8785

from conformance.cases import package_dir


def goldens_root() -> Path:
    return package_dir() / "goldens"


def golden_path(impl: str, era: str, case_id: str, root: Path | None = None) -> Path:
    return (root or goldens_root()) / impl / era / f"{case_id}.json"


def write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Canonical bytes make re-recording diffs meaningful: identical answers give identical files.
    path.write_bytes(rfc8785.dumps(data) + b"\n")


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def is_canonical(path: Path) -> bool:
    raw = path.read_bytes()
    return raw == rfc8785.dumps(json.loads(raw)) + b"\n"
