"""Speed: ours against the original QMD 2.8.3, side by side in one run.

1. Generate the synthetic corpus (benchmarks/corpus.py) in a temporary folder.
2. Indexing: the wall clock of the whole `qmd collection add <corpus> --name bench` process,
   for each implementation, each with its own HOME/XDG/INDEX_PATH/QMD_CONFIG_DIR.
3. Latency over MCP stdio (newline-delimited JSON-RPC, wait for the matching id), after
   warm-ups, cycling through a fixed query set:
   * ours, `qmd mcp`: the `search` tool; `get`; `status`;
   * ours, `qmd mcp --compat 2.8.3`: `query` with one lex sub-query and `rerank:false`;
     `get`; `status`;
   * original, `qmd mcp`: `query` with one lex sub-query and `rerank:false` (any other call
     makes it fetch models, which hangs for about 12 minutes offline); `get`; `status`.
4. A table with both implementations, the ratios ours/original and the targets
   "indexing no slower than the original" and "search median at most half the original's".

    .venv/bin/python -m benchmarks.bench_speed [--docs 5000] [--requests 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import corpus as corpus_mod
from benchmarks.harness import (
    BenchError,
    Implementation,
    McpServer,
    machine,
    original,
    ours,
    summary_ms,
    text_of,
)

COLLECTION = "bench"
LIMIT = 10

# Row labels of the printed table (the smoke test looks for them).
ROW_INDEX = "index: collection add (wall)"
ROW_INDEX_RSS = "index: peak RSS"
ROW_SEARCH_MEDIAN = "search median"
ROW_SEARCH_P99 = "search p99"
ROW_LEX_MEDIAN = "query lex median"
ROW_LEX_P99 = "query lex p99"
ROW_GET = "get median"
ROW_STATUS = "status median"
ROW_COLD = "mcp cold start"
ROW_RSS = "mcp peak RSS"


@dataclass
class ServerFigures:
    """What one MCP server run measured."""

    surface: str
    search_tool: str
    search: dict[str, float] = field(default_factory=dict)
    get: dict[str, float] = field(default_factory=dict)
    status: dict[str, float] = field(default_factory=dict)
    cold_start_ms: float = 0.0
    peak_rss_kib: int | None = None
    hits_per_query: float = 0.0
    documents: int | None = None


@dataclass
class ImplFigures:
    label: str
    index_s: float = 0.0
    index_runs: list[float] = field(default_factory=list)
    index_rss_kib: int = 0
    index_bytes: int = 0
    servers: dict[str, ServerFigures] = field(default_factory=dict)


def lex_arguments(query: str) -> dict[str, Any]:
    return {"searches": [{"type": "lex", "query": query}], "limit": LIMIT, "rerank": False}


def index(impl: Implementation, root: Path) -> ImplFigures:
    """Index `root` once from scratch (state wiped first); the index stays for the servers."""
    shutil.rmtree(impl.home / "config", ignore_errors=True)
    shutil.rmtree(impl.home / ".cache", ignore_errors=True)
    shutil.rmtree(impl.home / ".config", ignore_errors=True)
    for stale in impl.index_path.parent.glob(impl.index_path.name + "*"):
        stale.unlink()
    args = ("collection", "add", str(root), "--name", COLLECTION)
    rc, seconds, rss, tail = impl.run_measured(*args)
    if rc != 0:
        raise BenchError(f"{impl.label}: `qmd collection add` exited {rc}: {tail}")
    size = sum(p.stat().st_size for p in impl.index_path.parent.glob(impl.index_path.name + "*"))
    return ImplFigures(impl.label, index_s=seconds, index_rss_kib=rss, index_bytes=size)


def _documents_of(status: dict[str, Any]) -> int | None:
    structured = status.get("structuredContent") or {}
    if isinstance(structured.get("totalDocuments"), int):
        return int(structured["totalDocuments"])
    for line in text_of(status).splitlines():
        if "Total documents:" in line or "Documents:" in line:
            digits = "".join(c for c in line.split(":", 1)[1] if c.isdigit())
            if digits:
                return int(digits)
    return None


@dataclass(frozen=True)
class Plan:
    """One MCP server to measure: which implementation, surface and search tool."""

    impl: Implementation
    surface: str
    args: tuple[str, ...]
    search_tool: str

    def search_args(self, query: str) -> dict[str, Any]:
        if self.search_tool == "search":
            return {"query": query, "limit": LIMIT}
        return lex_arguments(query)


def _checked(server: McpServer, tool: str, arguments: dict[str, Any]) -> tuple[int, float]:
    result, seconds = server.call(tool, arguments)
    if result.get("isError"):
        raise BenchError(f"{server.impl.label} {tool} failed: {text_of(result)[:300]}")
    return len((result.get("structuredContent") or {}).get("results", [])), seconds


def measure_servers(
    plans: list[Plan], queries: list[str], files: list[str], requests: int, warmups: int
) -> dict[str, ServerFigures]:
    """Start every server, then interleave their requests (round robin, same request to each
    in turn) so that a change in machine load during the run hits all of them alike."""
    servers = [McpServer(plan.impl, *plan.args) for plan in plans]
    figures = {
        p.surface: ServerFigures(surface=p.surface, search_tool=p.search_tool) for p in plans
    }
    try:
        for plan, server in zip(plans, servers, strict=True):
            server.initialize()
            fig = figures[plan.surface]
            fig.cold_start_ms = server.cold_start_s * 1000
            status, _ = server.call("status", {})
            fig.documents = _documents_of(status)
        for i in range(warmups):
            for plan, server in zip(plans, servers, strict=True):
                _checked(server, plan.search_tool, plan.search_args(queries[i % len(queries)]))
                _checked(server, "get", {"file": files[i % len(files)]})
                _checked(server, "status", {})
        search: dict[str, list[float]] = {p.surface: [] for p in plans}
        hits: dict[str, int] = {p.surface: 0 for p in plans}
        for i in range(requests):
            for plan, server in zip(plans, servers, strict=True):
                count, seconds = _checked(
                    server, plan.search_tool, plan.search_args(queries[i % len(queries)])
                )
                search[plan.surface].append(seconds)
                hits[plan.surface] += count
        get: dict[str, list[float]] = {p.surface: [] for p in plans}
        status_times: dict[str, list[float]] = {p.surface: [] for p in plans}
        for i in range(requests):
            for plan, server in zip(plans, servers, strict=True):
                get[plan.surface].append(
                    _checked(server, "get", {"file": files[(i * 7) % len(files)]})[1]
                )
        for _ in range(requests):
            for plan, server in zip(plans, servers, strict=True):
                status_times[plan.surface].append(_checked(server, "status", {})[1])
        for plan, server in zip(plans, servers, strict=True):
            fig = figures[plan.surface]
            fig.search = summary_ms(search[plan.surface])
            fig.hits_per_query = hits[plan.surface] / requests
            fig.get = summary_ms(get[plan.surface])
            fig.status = summary_ms(status_times[plan.surface])
            fig.peak_rss_kib = server.peak_rss_kib()
    finally:
        for server in servers:
            server.close()
    return figures


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "ms":
        return f"{value:.2f} ms"
    if unit == "MiB":
        return f"{value / 1024:.0f} MiB"
    return f"{value}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}"


def _median(fig: ServerFigures | None, part: str, stat: str = "median_ms") -> float | None:
    if fig is None:
        return None
    figures: dict[str, float] = getattr(fig, part)
    return figures[stat]


def _kib(value: int | None) -> float | None:
    return None if value is None else float(value)


def build_report(
    ours_fig: ImplFigures, orig_fig: ImplFigures | None, meta: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The printed table and the JSON figures."""
    spec = ours_fig.servers["spec"]
    compat = ours_fig.servers["compat"]
    orig = orig_fig.servers["original"] if orig_fig else None
    rows: list[tuple[str, float | None, float | None, str, str]] = [
        (
            ROW_INDEX,
            ours_fig.index_s,
            orig_fig.index_s if orig_fig else None,
            "s",
            f"median of {len(ours_fig.index_runs)} run(s), whole process",
        ),
        (
            ROW_INDEX_RSS,
            _kib(ours_fig.index_rss_kib),
            _kib(orig_fig.index_rss_kib) if orig_fig else None,
            "MiB",
            "largest process",
        ),
        (
            ROW_SEARCH_MEDIAN,
            _median(spec, "search"),
            _median(orig, "search"),
            "ms",
            "ours: search tool; original: query lex",
        ),
        (
            ROW_SEARCH_P99,
            _median(spec, "search", "p99_ms"),
            _median(orig, "search", "p99_ms"),
            "ms",
            "",
        ),
        (
            ROW_LEX_MEDIAN,
            _median(compat, "search"),
            _median(orig, "search"),
            "ms",
            "ours --compat 2.8.3; both rerank:false",
        ),
        (
            ROW_LEX_P99,
            _median(compat, "search", "p99_ms"),
            _median(orig, "search", "p99_ms"),
            "ms",
            "",
        ),
        (
            ROW_GET,
            _median(spec, "get"),
            _median(orig, "get"),
            "ms",
            f"ours --compat: {compat.get['median_ms']:.2f} ms",
        ),
        (
            ROW_STATUS,
            _median(spec, "status"),
            _median(orig, "status"),
            "ms",
            f"ours --compat: {compat.status['median_ms']:.2f} ms",
        ),
        (
            ROW_COLD,
            spec.cold_start_ms,
            orig.cold_start_ms if orig else None,
            "ms",
            "spawn to initialize result",
        ),
        (
            ROW_RSS,
            _kib(spec.peak_rss_kib),
            _kib(orig.peak_rss_kib) if orig else None,
            "MiB",
            "VmHWM summed over the server's process tree",
        ),
    ]
    lines = [
        f"QMD speed benchmark: {meta['docs']} docs ({meta['corpus_mb']:.1f} MB), "
        f"{meta['requests']} requests per tool after {meta['warmups']} warm-ups, "
        f"{meta['queries']} queries, limit {LIMIT}",
        f"machine: {meta['machine']}",
        "",
        f"{'metric':<30} {'ours':>11} {'original':>11} {'ours/orig':>10}  note",
        "-" * 96,
    ]
    for label, a, b, unit, note in rows:
        lines.append(
            f"{label:<30} {_fmt(a, unit):>11} {_fmt(b, unit):>11} {_ratio(a, b):>10}  {note}"
        )
    orig_hits = f"{orig.hits_per_query:.1f}" if orig else "-"
    lines += [
        "-" * 96,
        f"documents indexed: ours {spec.documents}, original {orig.documents if orig else '-'}; "
        f"hits per search: ours search {spec.hits_per_query:.1f}, ours query lex "
        f"{compat.hits_per_query:.1f}, original query lex {orig_hits}",
        f"index runs (s): ours {_runs(ours_fig)}, original {_runs(orig_fig)}",
        "",
        "targets:",
    ]

    def verdict(ok: bool | None) -> str:
        return "n/a (no original)" if ok is None else ("PASS" if ok else "FAIL")

    orig_median = _median(orig, "search")
    half = None if orig_median is None else orig_median / 2
    index_ok = None if orig_fig is None else ours_fig.index_s <= orig_fig.index_s
    search_ok = None if half is None else spec.search["median_ms"] <= half
    lex_ok = None if half is None else compat.search["median_ms"] <= half
    lines += [
        f"  indexing no slower than the original: ours {ours_fig.index_s:.2f} s vs original "
        f"{_fmt(orig_fig.index_s if orig_fig else None, 's')} -> {verdict(index_ok)}",
        f"  search median at most half the original's: ours search "
        f"{spec.search['median_ms']:.2f} ms vs limit {_fmt(half, 'ms')} -> {verdict(search_ok)}",
        f"  (same target, ours --compat query lex): {compat.search['median_ms']:.2f} ms vs "
        f"limit {_fmt(half, 'ms')} -> {verdict(lex_ok)}",
    ]
    figures = {
        "meta": meta,
        "ours": _as_dict(ours_fig),
        "original": _as_dict(orig_fig) if orig_fig else None,
        "ratios_ours_over_original": {
            label: (a / b if a is not None and b else None) for label, a, b, _, _ in rows
        },
        "targets": {
            "indexing_no_slower": index_ok,
            "search_median_at_most_half": search_ok,
            "compat_query_lex_median_at_most_half": lex_ok,
        },
    }
    return "\n".join(lines), figures


def _runs(fig: ImplFigures | None) -> str:
    return "-" if fig is None else "/".join(f"{t:.2f}" for t in fig.index_runs)


def _as_dict(fig: ImplFigures) -> dict[str, Any]:
    return {
        "index_s": fig.index_s,
        "index_runs_s": fig.index_runs,
        "index_peak_rss_kib": fig.index_rss_kib,
        "index_bytes": fig.index_bytes,
        "servers": {name: vars(server) for name, server in fig.servers.items()},
    }


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="qmd-bench-speed-"))
    try:
        started = time.perf_counter()
        corpus = corpus_mod.generate(workdir / "corpus", args.docs, args.seed, args.queries)
        meta: dict[str, Any] = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "machine": machine(),
            "docs": len(corpus.files),
            "corpus_mb": corpus.total_bytes / 1e6,
            "requests": args.requests,
            "warmups": args.warmups,
            "queries": len(corpus.queries),
            "seed": args.seed,
        }
        print(
            f"corpus: {len(corpus.files)} files, {corpus.total_bytes / 1e6:.1f} MB "
            f"({time.perf_counter() - started:.1f} s)",
            file=sys.stderr,
        )
        files = [f"{COLLECTION}/{rel}" for rel in corpus.files[:: max(1, len(corpus.files) // 50)]]
        impls = [ours(workdir / "ours")]
        if not args.ours_only:
            impls.append(original(workdir / "original"))
        results: dict[str, ImplFigures] = {impl.label: ImplFigures(impl.label) for impl in impls}
        runs: dict[str, list[ImplFigures]] = {impl.label: [] for impl in impls}
        for round_number in range(args.index_runs):
            for impl in impls:  # alternate, so that load drift hits both alike
                print(f"{impl.label}: indexing, run {round_number + 1} ...", file=sys.stderr)
                runs[impl.label].append(index(impl, workdir / "corpus"))
        for impl in impls:
            done = runs[impl.label]
            times = [r.index_s for r in done]
            results[impl.label] = ImplFigures(
                impl.label,
                index_s=statistics.median(times),
                index_runs=times,
                index_rss_kib=max(r.index_rss_kib for r in done),
                index_bytes=done[-1].index_bytes,
            )
        plans = [
            Plan(impls[0], "spec", (), "search"),
            Plan(impls[0], "compat", ("--compat", "2.8.3"), "query"),
        ]
        if len(impls) > 1:
            plans.append(Plan(impls[1], "original", (), "query"))
        print(
            "latency: " + ", ".join(p.surface for p in plans) + " (interleaved) ...",
            file=sys.stderr,
        )
        measured = measure_servers(plans, corpus.queries, files, args.requests, args.warmups)
        for plan in plans:
            results[plan.impl.label].servers[plan.surface] = measured[plan.surface]
        table, figures = build_report(results["ours"], results.get("original"), meta)
        print(table)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
            print(f"\nfigures written to {args.json}")
        return 0
    finally:
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="QMD speed: ours against the original 2.8.3")
    parser.add_argument("--docs", type=int, default=5000, help="corpus size (default 5000)")
    parser.add_argument("--requests", type=int, default=200, help="timed requests per tool")
    parser.add_argument("--warmups", type=int, default=10, help="untimed requests first")
    parser.add_argument(
        "--index-runs", type=int, default=1, help="index this many times each, alternating"
    )
    parser.add_argument("--queries", type=int, default=30, help="size of the query set")
    parser.add_argument("--seed", type=int, default=corpus_mod.DEFAULT_SEED)
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--ours-only", action="store_true", help="skip the original")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except BenchError as error:
        print(f"bench_speed: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
