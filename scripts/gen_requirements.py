#!/usr/bin/env python3
"""Generate conformance/requirements.json from the requirement bullets in docs/spec/*.md.

    python scripts/gen_requirements.py          # rewrite the JSON
    python scripts/gen_requirements.py --check  # exit 1 if the JSON is out of date

A requirement is a bullet `- **REQ-…** [tags] text`, continued by lines indented two spaces.
Tags: `compat`, `spec`, `projmem`, `deferred: reason` (see docs/spec/README.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPEC_DIR = ROOT / "docs" / "spec"
OUTPUT = ROOT / "conformance" / "requirements.json"

BULLET = re.compile(r"^- \*\*(REQ-[A-Z0-9]+(?:-[A-Z0-9]+)*-[0-9]{3})\*\* \[([^\]]+)\] (.*)$")
ID_ANYWHERE = re.compile(r"\*\*(REQ-[^*]+)\*\*")
SURFACE_TAGS = {
    "compat": "compat-2.8.3",
    "spec": "spec",
    "ldims": "ldims",
    "memorize": "memorize",
    "projmem": "projmem",
}


class SpecError(ValueError):
    pass


def _parse_tags(raw: str, where: str) -> tuple[list[str], str | None]:
    surfaces: list[str] = []
    deferred: str | None = None
    head, sep, reason = raw.partition("deferred:")
    if sep:
        # Everything after "deferred:" is the reason, punctuation included.
        deferred = " ".join(reason.split())
        if not deferred:
            raise SpecError(f"{where}: deferred needs a reason")
    for tag in (t.strip() for t in head.replace(";", ",").split(",")):
        if not tag:
            continue
        if tag not in SURFACE_TAGS:
            raise SpecError(f"{where}: unknown tag {tag!r}")
        surfaces.append(SURFACE_TAGS[tag])
    if not surfaces:
        raise SpecError(f"{where}: name at least one surface (compat/spec/ldims/memorize/projmem)")
    return surfaces, deferred


def _blocks(md: Path) -> list[tuple[int, str, list[str]]]:
    """(line number, section, lines) per bullet; indented continuation lines belong to it."""
    out: list[tuple[int, str, list[str]]] = []
    section = ""
    current: list[str] | None = None
    fenced = False
    for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced  # examples inside code fences are not requirements
            current = None
            continue
        if fenced:
            continue
        if current is not None and line.startswith("  ") and line.strip():
            current.append(line.strip())
            continue
        current = None
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        elif line.startswith("- "):
            current = [line]
            out.append((n, section, current))
    return out


def collect(spec_dir: Path = SPEC_DIR) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for md in sorted(spec_dir.glob("*.md")):
        for n, section, parts in _blocks(md):
            where = f"{md.name}:{n}"
            m = BULLET.match(" ".join(parts))
            if not m:
                if ID_ANYWHERE.search(parts[0]):
                    raise SpecError(f"{where}: malformed requirement bullet: {parts[0][:80]}")
                continue
            rid, tags, body = m.groups()
            if rid in seen:
                raise SpecError(f"{where}: {rid} already defined at {seen[rid]}")
            seen[rid] = where
            surfaces, deferred = _parse_tags(tags, where)
            item: dict[str, Any] = {
                "id": rid,
                "doc": md.name,
                "section": section,
                "text": body.strip(),
                "surfaces": surfaces,
            }
            if deferred:
                item["deferred"] = deferred
            items.append(item)
    if not items:
        raise SpecError(f"no requirements found under {spec_dir}")
    return {
        "generated_by": "scripts/gen_requirements.py from docs/spec/*.md; do not edit",
        "requirements": sorted(items, key=lambda r: r["id"]),
    }


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the JSON is stale")
    args = parser.parse_args(argv)
    try:
        text = render(collect())
    except SpecError as exc:
        print(f"docs/spec: {exc}", file=sys.stderr)
        return 1
    if args.check:
        if not OUTPUT.is_file() or OUTPUT.read_text(encoding="utf-8") != text:
            print(
                f"{OUTPUT.relative_to(ROOT)} is out of date: run scripts/gen_requirements.py",
                file=sys.stderr,
            )
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(
        f"wrote {len(json.loads(text)['requirements'])} requirements to {OUTPUT.relative_to(ROOT)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
