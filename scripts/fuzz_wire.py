"""The MCP wire fuzzer, long run: N frames per surface against real `qmd mcp` processes.

    PYTHONPATH=. .venv/bin/python scripts/fuzz_wire.py --frames 100000
        [--surface spec|compat|both|all|NAME] [--transport stdio|http|both|all|http-2025|
        http-2026-07-28] [--seed S] [--batch 25] [--hang 10] [--index DIR]
        [--crash-dir DIR] [--json OUT] [--server-root CHECKOUT] [--progress N]

`--surface all` fuzzes every registered surface (or NAME, one of them); `--transport all` is
stdio, then HTTP with 2025-era requests, then HTTP with 2026-07-28 requests (`http` mixes
both eras).

Builds the conformance fixture index (once, under --index), then drives `qmd mcp` and
`qmd mcp --compat 2.8.3` with structure-aware and mutated frames, judging every reply by the
docs/spec oracle: over stdio (tests/fuzz/oracle.py), or over HTTP (`qmd mcp --http`, one
keep-alive connection, frames POSTed to /mcp in both protocol eras plus HTTP-level mutations,
judged by tests/fuzz/http_oracle.py). Prints one summary line per surface and transport:
frames, replies, crashes, hangs, non-strict replies, oracle violations, internal errors,
frames/s, the slowest frame and peak RSS. Exits 1 unless every surface is clean.
Frames of a batch (or the HTTP request) that crashed the server are written to --crash-dir,
to become regression cases (tests/fuzz/regressions/, tests/unit/test_wire.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz import driver, http_driver


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--surface", default="both", help="spec, compat, both, all or a name")
    parser.add_argument(
        "--transport",
        choices=["stdio", "http", "both", "all", "http-2025", "http-2026-07-28"],
        default="stdio",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--hang", type=float, default=10.0, help="seconds without a reply")
    parser.add_argument("--index", type=Path, default=None)
    parser.add_argument("--crash-dir", type=Path, default=Path("fuzz-crashes"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--server-root", type=Path, default=driver.REPO, help="checkout whose server to fuzz"
    )
    parser.add_argument("--progress", type=int, default=0, help="HTTP: a line every N frames")
    args = parser.parse_args()
    index = args.index or Path(tempfile.mkdtemp(prefix="qmd-fuzz-"))
    env = driver.fuzz_env(index)
    legacy = {"spec": [False], "compat": [True], "both": [False, True]}
    if args.surface in legacy:
        profiles = [driver.Profile.legacy(compat) for compat in legacy[args.surface]]
    else:
        from adapters.mcp.registry import surface_names

        names = surface_names() if args.surface == "all" else [args.surface]
        profiles = [driver.surface_profile(env, name, args.server_root) for name in names]
    reports = []
    transports = {
        "both": ["stdio", "http"],
        "all": ["stdio", "http-2025", "http-2026-07-28"],
    }.get(args.transport, [args.transport])
    for transport, profile in [(t, p) for t in transports for p in profiles]:
        if transport.startswith("http"):
            report = http_driver.run(
                env,
                profile.compat,
                args.frames,
                args.seed,
                args.hang,
                args.crash_dir,
                server_root=args.server_root,
                progress_every=args.progress,
                profile=profile,
                era=transport.removeprefix("http-") if transport != "http" else None,
            )
        else:
            report = driver.run(
                env,
                profile.compat,
                args.frames,
                args.seed,
                args.batch,
                args.hang,
                args.crash_dir,
                server_root=args.server_root,
                profile=profile,
            )
        reports.append(report)
        print(report.summary(), flush=True)
        for example in report.examples:
            print("   ", example)
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "surface": r.surface,
                        "frames": r.frames,
                        "replies": r.replies,
                        "crashes": r.crashes,
                        "hangs": r.hangs,
                        "non_strict": r.non_strict,
                        "violations": r.violations,
                        "internal_errors": r.internal_errors,
                        "frames_per_second": round(r.frames_per_second, 1),
                        "slowest_frame_seconds": round(r.max_frame_seconds, 3),
                        "peak_rss_mb": round(r.max_rss_mb, 1),
                        "seconds": round(r.seconds, 1),
                    }
                    for r in reports
                ],
                indent=2,
            )
        )
    return 0 if all(r.clean for r in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
