"""Orchestration: set the fixture up once, then run every selected case in every era."""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from conformance import __version__, baselines, goldens, profiles
from conformance.cases import ERAS, Case, load_cases
from conformance.fixture import (
    default_fixtures_dir,
    expand,
    make_scratch,
    profile_placeholders,
    run_setup,
    server_env,
)
from conformance.http_transport import HttpServerProcess, HttpTarget, free_port, probe_modern
from conformance.report import Result, print_results, summary, summary_line, write_json, write_junit
from conformance.runner import (
    MODERN,
    Outcome,
    ServerSpec,
    execute,
    execute_http,
    start_and_handshake,
)
from conformance.transport import ServerStartError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_START, EXIT_DATA = 0, 1, 2, 3, 4


@dataclass
class Options:
    profile: profiles.Profile
    eras: list[str] = field(default_factory=lambda: list(ERAS))
    case_patterns: list[str] = field(default_factory=list)
    qmd_bin: str | None = None
    baseline: Path | None = None
    use_baseline: bool = True
    fixtures: Path | None = None
    cases_dir: Path | None = None
    goldens_dir: Path | None = None
    timeout: float = 15.0
    jobs: int = 4
    report_json: Path | None = None
    report_junit: Path | None = None
    keep_scratch: bool = False
    verbose: bool = False
    record: bool = False
    transport: str = "stdio"  # or "http"
    url: str | None = None  # http: a server already listening (no launch)
    summary_only: bool = False  # --summary: one line per requirement area, not per case
    eras_forced: bool = False  # --era given: a failing handshake stops the run, no fallback


def select(cases: list[Case], opts: Options) -> list[tuple[Case, str]]:
    chosen: list[tuple[Case, str]] = []
    for case in cases:
        if opts.profile.surface not in case.surfaces or opts.transport not in case.transports:
            continue
        if case.fixture != opts.profile.fixture:  # the index the case needs is not built
            continue
        if opts.case_patterns and not any(
            fnmatch.fnmatchcase(case.id, p) for p in opts.case_patterns
        ):
            continue
        chosen += [(case, era) for era in case.eras if era in opts.eras]
    if opts.record:
        chosen = [(c, e) for c, e in chosen if c.uses_golden]
    return chosen


def _version_of(argv: list[str], env: dict[str, str]) -> str:
    try:
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (out.stdout.strip() or out.stderr.strip() or "unknown").splitlines()[0]


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    cases = load_cases(opts.cases_dir)
    chosen = select(cases, opts)
    if not chosen:
        print(
            "no cases selected (check --case, --era, the surface and the fixture)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    profile = opts.profile
    entries: list[baselines.Entry] = []
    if opts.use_baseline and not opts.record:
        entries = baselines.load(opts.baseline or profile.baseline, [c.id for c in cases])

    try:
        qmd, path_dirs = profiles.resolve_binary(profile, opts.qmd_bin)
    except FileNotFoundError as exc:
        print(f"server could not start: {exc}", file=sys.stderr)
        return EXIT_START

    scratch_root = Path(tempfile.mkdtemp(prefix="qmd-conformance-"))
    try:
        scratch = make_scratch(
            scratch_root / "run", opts.fixtures or default_fixtures_dir(), opts.profile.fixture
        )
        env = server_env(scratch, profile, path_dirs)
        logs = scratch.root / "logs"
        logs.mkdir()
        try:
            setup_log, setup_failures = run_setup(scratch, profile, qmd, env)
            (logs / "setup.log").write_text(setup_log, encoding="utf-8")
        except ServerStartError as exc:
            print(f"server could not start: fixture setup failed: {exc}", file=sys.stderr)
            return EXIT_START
        spec = ServerSpec(
            argv=expand(profile.launch, profile_placeholders(scratch, profile, qmd)),
            env=env,
            cwd=scratch.root,
            fixture_roots=scratch.fixture_roots(),
            logs=logs,
            request_timeout=opts.timeout,
        )
        setup_notes = [asdict(failure) for failure in setup_failures]
        if opts.transport == "http":
            return _run_http(opts, chosen, entries, spec, scratch, qmd, env, out, setup_failures)
        failed_eras: dict[str, str] = {}
        for era in sorted({e for _, e in chosen}):
            try:
                server, _ = start_and_handshake(spec, era, f"preflight.{era}")
                server.close()
            except ServerStartError as exc:
                failed_eras[era] = str(exc)
        chosen, fallback, fatal = _era_fallback(chosen, failed_eras, opts.eras_forced)
        if fatal:
            print(f"server could not start ({fatal}", file=sys.stderr)
            return EXIT_START
        requirement_ids = _header(chosen, opts, fallback, out)
        _print_setup_failures(setup_failures, out)

        golden_impl = profile.goldens
        loaded: dict[tuple[str, str], dict[str, Any] | None] = {}
        for case, era in chosen:
            path = goldens.golden_path(golden_impl or "", era, case.id, opts.goldens_dir)
            loaded[(case.id, era)] = goldens.read(path) if golden_impl and path.is_file() else None

        def work(item: tuple[Case, str]) -> Outcome:
            case, era = item
            return execute(case, era, spec, loaded[(case.id, era)], opts.record)

        with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
            outcomes = list(pool.map(work, chosen))

        if opts.record:
            return _finish_record(outcomes, profile, qmd, env, opts, out)
        return _finish_run(
            outcomes, entries, profile, opts, out, requirement_ids, setup_notes, fallback
        )
    finally:
        if opts.keep_scratch:
            print(f"scratch kept in {scratch_root}", file=out)
        else:
            shutil.rmtree(scratch_root, ignore_errors=True)


def _era_fallback(
    chosen: list[tuple[Case, str]], failed: dict[str, str], forced: bool
) -> tuple[list[tuple[Case, str]], str | None, str | None]:
    """Drop the eras whose handshake failed, unless the user named them with --era.

    Returns (the runs left, the fallback note for the report's first line, a fatal reason).
    A 2025-only port (no `server/discover`) still gets its 2025-era cases run.
    """
    if not failed:
        return chosen, None, None
    era, reason = next(iter(sorted(failed.items())))
    left = [(c, e) for c, e in chosen if e not in failed]
    if forced or not left:
        return chosen, None, f"{era} handshake): {reason}"
    spoken = ", ".join(sorted({e for _, e in left}))
    first = reason.strip().splitlines()[0] if reason.strip() else "no reason given"
    note = (
        f"era {spoken} only: the {', '.join(sorted(failed))} handshake failed ({first}); "
        f"{len(chosen) - len(left)} case/era runs of that era not run (--era forces an era)"
    )
    return left, note, None


def _header(
    chosen: list[tuple[Case, str]], opts: Options, fallback: str | None, out: TextIO
) -> list[str]:
    """The report's first line: what runs against what, in which eras (and any fallback)."""
    requirement_ids = sorted({r for c, _ in chosen for r in c.requirements})
    distinct = sorted({c.id for c, _ in chosen})
    verb = "Recording" if opts.record else "Running"
    eras = fallback or "eras " + ", ".join(sorted({e for _, e in chosen}))
    print(
        f"{verb} {len(distinct)} cases ({len(chosen)} case/era runs) covering "
        f"{len(requirement_ids)} requirement IDs against {opts.profile.name} "
        f"(surface {opts.profile.surface}); {eras}",
        file=out,
    )
    return requirement_ids


def _print_setup_failures(failures: list[Any], out: TextIO) -> None:
    for failure in failures:
        print(f"SETUP FAILED {failure.render()}", file=out)
    if failures:
        print("running the cases anyway", file=out)


def _load_goldens(
    opts: Options, chosen: list[tuple[Case, str]]
) -> dict[tuple[str, str], dict[str, Any] | None]:
    golden_impl = opts.profile.goldens
    loaded: dict[tuple[str, str], dict[str, Any] | None] = {}
    for case, era in chosen:
        path = goldens.golden_path(golden_impl or "", era, case.id, opts.goldens_dir)
        loaded[(case.id, era)] = goldens.read(path) if golden_impl and path.is_file() else None
    return loaded


def _run_http(
    opts: Options,
    chosen: list[tuple[Case, str]],
    entries: list[baselines.Entry],
    spec: ServerSpec,
    scratch: Any,
    qmd: str | None,
    env: dict[str, str],
    out: TextIO,
    setup_failures: list[Any],
) -> int:
    """One server for the whole run (stateless HTTP), or the one at --url."""
    profile = opts.profile
    server: HttpServerProcess | None = None
    if opts.url:
        target = HttpTarget(opts.url.rstrip("/"), opts.timeout)
        if not target.healthy():
            print(
                f"server could not start: GET {opts.url}/health did not answer 200", file=sys.stderr
            )
            return EXIT_START
    else:
        if not profile.launch_http:
            print(f"profile {profile.name} has no launch_http command", file=sys.stderr)
            return EXIT_USAGE
        port = free_port()
        target = HttpTarget(f"http://localhost:{port}", opts.timeout)
        placeholders = {**profile_placeholders(scratch, profile, qmd), "port": str(port)}
        argv = expand(profile.launch_http, placeholders)
        server = HttpServerProcess(argv, env, scratch.root, spec.logs / "http-server.log")
        try:
            server.start(target)
        except ServerStartError as exc:
            server.close()
            print(f"server could not start (http): {exc}", file=sys.stderr)
            return EXIT_START
    try:
        failed = {}
        if MODERN in {e for _, e in chosen}:
            why = probe_modern(target)
            failed = {MODERN: f"POST /mcp server/discover answered {why}"} if why else {}
        chosen, fallback, fatal = _era_fallback(chosen, failed, opts.eras_forced)
        if fatal:
            print(f"server could not start ({fatal}", file=sys.stderr)
            return EXIT_START
        requirement_ids = _header(chosen, opts, fallback, out)
        _print_setup_failures(setup_failures, out)
        loaded = _load_goldens(opts, chosen)
        outcomes = [
            execute_http(case, era, target, spec, loaded[(case.id, era)], opts.record)
            for case, era in chosen
        ]
    finally:
        if server is not None:
            server.close()
    if opts.record:
        return _finish_record(outcomes, profile, qmd, env, opts, out)
    setup_notes = [asdict(failure) for failure in setup_failures]
    return _finish_run(
        outcomes, entries, profile, opts, out, requirement_ids, setup_notes, fallback
    )


def _finish_run(
    outcomes: list[Outcome],
    entries: list[baselines.Entry],
    profile: profiles.Profile,
    opts: Options,
    out: TextIO,
    requirement_ids: list[str],
    setup_failures: list[dict[str, Any]],
    era_fallback: str | None = None,
) -> int:
    results: list[Result] = []
    for o in outcomes:
        verdict = baselines.judge(entries, o.case.id, o.era, o.passed)
        results.append(Result(o, verdict.status, verdict.reason))
    print_results(results, out, opts.verbose, opts.summary_only)
    meta = {
        "tool": f"qmd-conformance {__version__}",
        "implementation": profile.name,
        "surface": profile.surface,
        "goldens": profile.goldens,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cases": len({o.case.id for o in outcomes}),
        "requirements": requirement_ids,
        "fixture": profile.fixture,
        "setup_failures": setup_failures,
        "eras": sorted({o.era for o in outcomes}),
        "era_fallback": era_fallback,
    }
    if opts.report_json:
        write_json(opts.report_json, results, meta)
    if opts.report_junit:
        write_junit(opts.report_junit, results, f"qmd-conformance.{profile.name}")
    print(summary_line(results), file=out)
    return EXIT_OK if summary(results)["failed"] == 0 else EXIT_FAIL


def _finish_record(
    outcomes: list[Outcome],
    profile: profiles.Profile,
    qmd: str | None,
    env: dict[str, str],
    opts: Options,
    out: TextIO,
) -> int:
    if not profile.goldens:
        print("this profile has no goldens name to record under", file=sys.stderr)
        return EXIT_USAGE
    provenance = {
        "implementation": profile.name,
        "version": _version_of([qmd, "--version"], env) if qmd else "unknown",
        "node": _version_of(["node", "--version"], env)
        if profile.binary and profile.binary.get("node")
        else None,
        "date": datetime.now(UTC).date().isoformat(),
        "recorder": f"qmd-conformance {__version__}",
        "python": sys.version.split()[0],
        "platform": sys.platform,
    }
    bad = 0
    for o in outcomes:
        if o.failures:
            bad += 1
            print(f"NOT RECORDED {o.case.id} [{o.era}]", file=out)
            for f in o.failures:
                print("  " + f.render().replace("\n", "\n  "), file=out)
            continue
        data = {"case": o.case.id, "era": o.era, "provenance": provenance, "exchanges": o.exchanges}
        goldens.write(
            goldens.golden_path(profile.goldens, o.era, o.case.id, opts.goldens_dir), data
        )
    print(f"{len(outcomes) - bad} recorded, {bad} not recorded", file=out)
    return EXIT_OK if bad == 0 else EXIT_FAIL


def env_jobs() -> int:
    return int(os.environ.get("QMD_CONFORMANCE_JOBS", "0")) or min(4, os.cpu_count() or 2)
