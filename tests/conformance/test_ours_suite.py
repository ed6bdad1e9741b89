"""The compatibility gate for our own server: the whole suite against both MCP surfaces.

`ours-compat` must reproduce every golden recorded from the original 2.8.3 (or carry a
reasoned baseline entry); `ours-spec` must satisfy every case written from seeds 000/001;
`ours-spec-models` runs the spec cases that need vectors, on a fixture embedded with the
real MiniLM GGUF (`scripts/prepare_models.py`); `ours-spec-rooted` serves the default fixture
with `--force-root` on its handbook folder; `ours-ldims` the LDIMS surface of seed 003 over
the default fixture; `ours-projmem` serves the projmem surface (seed 002)
over the default fixture; `ours-spec-remote` runs the embedded cases with that
GGUF served over HTTP by llama_cpp.server (scripts/model_server.py), so remote vectors must
rank as in-process ones do (about 30 s on the two-core machine); `ours-memorize` runs the
memorize surface's cases (seed 004) with that GGUF as its embedding model.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import psycopg
import pytest
import yaml
from psycopg import sql

from conformance.cases import load_cases
from tests.conformance.helpers import run_cli
from tests.conformance.passes import suite_pass
from tests.postgres_server import server_url


@pytest.mark.parametrize(
    ("impl", "surface", "fixture"),
    [
        ("ours-compat", "compat-2.8.3", "default"),
        ("ours-spec", "spec", "default"),
        pytest.param("ours-spec-models", "spec", "embedded", marks=pytest.mark.models),
        # seed 004's memory surface, with the MiniLM GGUF as its embedding model
        pytest.param("ours-memorize", "memorize", "default", marks=pytest.mark.models),
        ("ours-spec-rooted", "spec", "rooted"),
        ("ours-ldims", "ldims", "default"),  # seed 003's surface (docs/spec/ldims.md)
        # seed 002's projmem surface over the default fixture and the fixture transcripts
        ("ours-projmem", "projmem", "default"),
        pytest.param("ours-spec-remote", "spec", "embedded", marks=pytest.mark.models),
        # the model-backed goldens recorded from the original with the same GGUF files
        pytest.param(
            "ours-compat-models", "compat-2.8.3", "local-models", marks=pytest.mark.models
        ),
        # the goldens recorded from the original on the real set (EmbeddingGemma, Qwen2.5)
        pytest.param(
            "ours-compat-real",
            "compat-2.8.3",
            "real-models",
            marks=[pytest.mark.models, pytest.mark.real_models],
        ),
    ],
)
def test_full_suite_passes_against_our_server(
    impl: str, surface: str, fixture: str, suite_reports: Path
) -> None:
    done = suite_pass(suite_reports, impl)
    assert done.returncode == 0, done.output
    cases = [
        c
        for c in load_cases()
        if surface in c.surfaces and c.fixture == fixture and "stdio" in c.transports
    ]
    assert cases
    expected_runs = sum(len(c.eras) for c in cases)
    listed = expected_failures(impl)  # known gaps its baseline names (stale ones fail the run)
    expected_xfail = sum(len(c.eras) for c in cases if c.id in listed)
    assert done.report()["summary"] == {
        "passed": expected_runs - expected_xfail,
        "failed": 0,
        "skipped": expected_xfail,
    }
    assert "<testsuite" in done.junit_path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("impl", "surface"),
    [
        ("ours-spec-postgres", "spec"),
        # seed 003's surface: metadata filters, extraction states, the semantic fallback
        ("ours-ldims-postgres", "ldims"),
        # seed 002's surface: chunk rows and namespace ids in PostgreSQL
        ("ours-projmem-postgres", "projmem"),
        # the original's goldens byte for byte, but for the BM25 tie orders its baseline lists
        ("ours-compat-postgres", "compat-2.8.3"),
    ],
)
def test_suite_passes_with_the_index_in_postgresql(impl: str, surface: str, tmp_path: Path) -> None:
    """Each surface's cases with the index in PostgreSQL (a fresh schema of the session's local
    server per fixture copy). Only compat has expected failures, none of them the backend's
    since PostgreSQL computes FTS5's bm25 (issue 36); a listed case that passes fails the run
    (stale)."""
    report = tmp_path / "report.json"
    # The run's scratch folder is kept in tmp_path: its name is the schema's, so only this
    # run's schema is dropped, never one another worker's (or another checkout's) run uses.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "QMD_CONFORMANCE_PG_URL": server_url(), "TMPDIR": str(scratch)}
    try:
        proc = run_cli(
            "run",
            "--impl",
            impl,
            "--timeout",
            "120",
            "--jobs",
            "2",
            "--keep-scratch",
            "--report-json",
            str(report),
            env=env,
        )
    finally:
        with psycopg.connect(server_url(), autocommit=True) as conn:
            for kept in scratch.glob("qmd-conformance-*"):
                schema = "conf_" + re.sub(r"[^a-z0-9]", "_", kept.name.lower())
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    cases = [
        c
        for c in load_cases()
        if surface in c.surfaces and c.fixture == "default" and "stdio" in c.transports
    ]
    assert cases
    listed = expected_failures(impl)
    expected_xfail = sum(len(c.eras) for c in cases if c.id in listed)
    summary = json.loads(report.read_text())["summary"]
    assert summary == {
        "passed": sum(len(c.eras) for c in cases) - expected_xfail,
        "failed": 0,
        "skipped": expected_xfail,
    }


def expected_failures(impl: str) -> set[str]:
    """The case ids an implementation's baseline lists (all of them with era `all`)."""
    path = Path(__file__).resolve().parents[2] / "conformance" / "baselines" / f"{impl}.yaml"
    if not path.is_file():
        return set()
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))["expected_failures"] or []
    assert all(entry["era"] == "all" for entry in entries)
    return {str(entry["case"]) for entry in entries}


@pytest.mark.parametrize(
    ("impl", "surface", "at_least"),
    [
        ("ours-compat", "compat-2.8.3", 40),
        # every other surface over HTTP in both eras (REQ-MCP-HTTP-008)
        ("ours-spec", "spec", 4),
        ("ours-ldims", "ldims", 4),
        ("ours-projmem", "projmem", 4),
        pytest.param("ours-memorize", "memorize", 4, marks=pytest.mark.models),
    ],
)
def test_http_suite_passes_against_our_server(
    impl: str, surface: str, at_least: int, suite_reports: Path
) -> None:
    """The HTTP cases (goldens recorded from the original's `qmd mcp --http`, matchers for
    the other surfaces) against ours."""
    done = suite_pass(suite_reports, impl, "http")
    assert done.returncode == 0, done.output
    cases = [c for c in load_cases() if "http" in c.transports and surface in c.surfaces]
    assert len(cases) >= at_least
    assert {e for c in cases for e in c.eras} == {"2025", "2026-07-28"}
    listed = expected_failures(impl)
    expected_xfail = sum(len(c.eras) for c in cases if c.id in listed)
    assert done.report()["summary"] == {
        "passed": len(cases) - expected_xfail,
        "failed": 0,
        "skipped": expected_xfail,
    }
