"""Command line: `qmd-conformance run|record|list|validate`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance import __version__, baselines, goldens, matrix, profiles, requirements
from conformance.cases import ERAS, FIXTURES, SURFACES, CaseError, load_cases
from conformance.suite import EXIT_DATA, EXIT_FAIL, EXIT_OK, EXIT_USAGE, Options, env_jobs, run

EPILOG = """\
examples:
  # the original QMD 2.8.3 (installed by scripts/install_original.sh into .tools/original)
  qmd-conformance run --impl original-2.8.3
  # this repository's server, compat surface / spec surface
  qmd-conformance run --impl ours-compat
  qmd-conformance run --impl ours-spec
  # any other QMD port, in one command: the setup command builds the index described by
  # fixtures/setup.json ($QMD_FIXTURE_ROOT, $INDEX_PATH, $QMD_CONFIG_DIR are set for it)
  qmd-conformance run --server-cmd "my-qmd mcp" \\
      --setup-cmd 'my-qmd index --from "$QMD_FIXTURE_SETUP"'

exit codes: 0 conformant, 1 failures or stale baseline entries, 2 usage,
            3 server could not start, 4 invalid case data
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="qmd-conformance",
        description="Replay golden MCP JSON-RPC cases against a QMD server and report what "
        "differs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"qmd-conformance {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def target_options(sp: argparse.ArgumentParser) -> None:
        g = sp.add_argument_group("implementation under test")
        g.add_argument(
            "--impl", metavar="NAME", help=f"a shipped profile: {', '.join(profiles.available())}"
        )
        g.add_argument("--profile", type=Path, help="a profile JSON file")
        g.add_argument(
            "--server-cmd",
            help="any stdio MCP server command line; placeholders "
            "{index} {config_dir} {fixtures} {home} are expanded",
        )
        g.add_argument(
            "--setup-cmd",
            action="append",
            help="with --server-cmd: shell command that builds the fixture index (omitted: no "
            "setup); repeat it for several steps: a failing step is reported and the cases "
            "still run",
        )
        g.add_argument(
            "--surface",
            choices=SURFACES,
            default="compat-2.8.3",
            help="with --server-cmd: which tool surface it serves",
        )
        g.add_argument(
            "--fixture",
            choices=FIXTURES,
            default="default",
            help="with --server-cmd: the fixture --setup-cmd builds; embedded = it also "
            "computes embeddings, which selects the vector-search cases",
        )
        g.add_argument(
            "--goldens",
            metavar="IMPL",
            default="original-2.8.3",
            help="with --server-cmd: whose goldens to compare with",
        )
        g.add_argument(
            "--qmd-bin",
            help="the qmd executable a profile launches (default: "
            "the profile's env variable, e.g. QMD_ORIGINAL_BIN, then its defaults)",
        )
        sel = sp.add_argument_group("selection")
        sel.add_argument(
            "--era",
            action="append",
            choices=ERAS,
            help="protocol era(s) to run (default: every era the server answers the handshake "
            "of; a server without the 2026-07-28 one gets the 2025-era cases, said in the "
            "report's first line). Given, a failing handshake stops the run (exit 3)",
        )
        sel.add_argument(
            "--case",
            action="append",
            default=[],
            metavar="GLOB",
            help="only case ids matching this glob (repeatable)",
        )
        sel.add_argument(
            "--transport",
            choices=("stdio", "http"),
            default="stdio",
            help="stdio (default): a server process per case; http: the profile's "
            "launch_http server (or --url) and the HTTP cases",
        )
        sel.add_argument(
            "--url",
            metavar="URL",
            help="with --transport http: a server already listening (e.g. http://localhost:8181)",
        )
        sel.add_argument("--cases-dir", type=Path, help=argparse.SUPPRESS)
        sel.add_argument("--goldens-dir", type=Path, help=argparse.SUPPRESS)
        sel.add_argument("--fixtures", type=Path, help="fixtures folder (default: the repo's)")
        sp.add_argument(
            "--timeout",
            type=float,
            default=15.0,
            help="seconds to wait for each reply (default 15)",
        )
        sp.add_argument(
            "--jobs",
            type=int,
            default=env_jobs(),
            help="servers run in parallel (default: min(4, CPUs))",
        )
        sp.add_argument(
            "--keep-scratch",
            action="store_true",
            help="keep the scratch folder (index, server stderr logs)",
        )

    run_p = sub.add_parser(
        "run",
        help="run the suite",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target_options(run_p)
    run_p.add_argument(
        "--baseline",
        type=Path,
        help="expected-failure baseline YAML (default: conformance/baselines/<impl>.yaml)",
    )
    run_p.add_argument("--no-baseline", action="store_true", help="ignore any baseline")
    run_p.add_argument("--report-json", type=Path, metavar="PATH")
    run_p.add_argument("--report-junit", type=Path, metavar="PATH")
    run_p.add_argument(
        "-v", "--verbose", action="store_true", help="also show details of expected failures"
    )
    run_p.add_argument(
        "--summary",
        action="store_true",
        help="one line per requirement area (a docs/spec section) instead of one per case; "
        "the failures grouped by root cause still follow",
    )

    rec = sub.add_parser("record", help="record goldens from a reference implementation")
    target_options(rec)

    mat = sub.add_parser(
        "matrix",
        help="write a compatibility matrix (implementations x requirement areas) from JSON reports",
    )
    mat.add_argument(
        "--report",
        action="append",
        required=True,
        metavar="LABEL=PATH",
        help="a --report-json file and the column it feeds (repeat; reports with the same "
        "label merge)",
    )
    mat.add_argument("--out", type=Path, help="write here instead of stdout")
    mat.add_argument(
        "--check",
        type=Path,
        metavar="PAGE",
        help="write nothing; exit 1 when PAGE's table states any cell of the given columns "
        "differently (the committed matrix against a fresh run)",
    )
    mat.add_argument("--notes", type=Path, help="a Markdown file appended as written")
    mat.add_argument(
        "--made-by",
        default="qmd-conformance matrix …",
        help="the command line to print as how the page was made",
    )

    sub.add_parser("list", help="list cases and the requirements they cover")
    sub.add_parser("validate", help="check cases, goldens, baselines and requirements")
    return p


def _profile(args: argparse.Namespace, parser: argparse.ArgumentParser) -> profiles.Profile:
    chosen = [x for x in (args.impl, args.profile, args.server_cmd) if x]
    if len(chosen) != 1:
        parser.error("give exactly one of --impl, --profile or --server-cmd")
    if args.setup_cmd and not args.server_cmd:
        parser.error("--setup-cmd only goes with --server-cmd")
    try:
        if args.server_cmd:
            return profiles.from_command_line(
                args.server_cmd, args.setup_cmd, args.surface, args.goldens, args.fixture
            )
        return profiles.load(str(args.profile or args.impl))
    except profiles.ProfileError as exc:
        parser.error(str(exc))
        raise  # unreachable: parser.error exits


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            return _list()
        if args.command == "validate":
            return _validate()
        if args.command == "matrix":
            return _matrix(args, parser)
        profile = _profile(args, parser)
        opts = Options(
            profile=profile,
            eras=args.era or list(ERAS),
            eras_forced=bool(args.era),
            case_patterns=args.case,
            qmd_bin=args.qmd_bin,
            fixtures=args.fixtures,
            cases_dir=args.cases_dir,
            goldens_dir=args.goldens_dir,
            timeout=args.timeout,
            jobs=args.jobs,
            keep_scratch=args.keep_scratch,
            record=args.command == "record",
            transport=args.transport,
            url=args.url,
        )
        if args.url and args.transport != "http":
            parser.error("--url goes with --transport http")
        if args.command == "run":
            opts.baseline = args.baseline
            opts.use_baseline = not args.no_baseline
            opts.report_json = args.report_json
            opts.report_junit = args.report_junit
            opts.verbose = args.verbose
            opts.summary_only = args.summary
        return run(opts)
    except CaseError as exc:
        print(f"invalid case data: {exc}", file=sys.stderr)
        return EXIT_DATA


def _matrix(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        columns = matrix.load_columns(matrix.parse_report_options(args.report))
    except ValueError as exc:
        parser.error(str(exc))
    text = matrix.render(columns, requirements.load(), args.made_by)
    if args.notes:
        text += "\n" + args.notes.read_text(encoding="utf-8")
    if args.check:
        problems = matrix.check(args.check.read_text(encoding="utf-8"), text)
        for problem in problems:
            print(f"matrix differs: {problem}", file=sys.stderr)
        print(
            f"{args.check}: {'matches' if not problems else f'{len(problems)} cell(s) differ'} "
            f"for {', '.join(c.label for c in columns)}"
        )
        return EXIT_OK if not problems else EXIT_FAIL
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _list() -> int:
    cases = load_cases()
    reqs = requirements.load()
    for case in cases:
        print(
            f"{case.id:55} {'/'.join(case.eras):18} {','.join(case.surfaces):20} "
            f"{' '.join(case.requirements)}"
        )
    cited = {r for c in cases for r in c.requirements}
    active = {k for k, v in reqs.items() if not v.deferred}
    print(
        f"{len(cases)} cases; {len(cited & set(reqs))} of {len(active)} active requirement "
        f"IDs covered; {len(reqs) - len(active)} deferred"
    )
    return EXIT_OK


def _validate() -> int:
    """Everything a CI job can check without starting a server."""
    problems: list[str] = []
    cases = load_cases()  # raises CaseError (exit 4) on schema problems
    reqs = requirements.load()
    ids = {c.id for c in cases}
    for case in cases:
        for r in case.requirements:
            if r not in reqs:
                problems.append(f"{case.id}: unknown requirement {r}")
            elif reqs[r].deferred:
                problems.append(f"{case.id}: cites deferred requirement {r}")
    for name in profiles.available():
        prof = profiles.load(name)
        baselines.load(prof.baseline, ids)
    root = goldens.goldens_root()
    for path in sorted(root.rglob("*.json")):
        if path.stem not in ids:
            problems.append(f"orphan golden (no such case): {path.relative_to(root)}")
        elif not goldens.is_canonical(path):
            problems.append(f"golden not in RFC 8785 canonical form: {path.relative_to(root)}")
    for p in problems:
        print(p, file=sys.stderr)
    print(
        f"{len(cases)} cases, {len(reqs)} requirements: "
        f"{'ok' if not problems else f'{len(problems)} problem(s)'}"
    )
    return EXIT_OK if not problems else (EXIT_DATA if problems else EXIT_FAIL)


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["EXIT_USAGE", "main"]
