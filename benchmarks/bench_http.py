"""The HTTP service under load: ours (`qmd mcp --http --compat 2.8.3`) and the original's
`qmd mcp --http`, side by side on the same corpus, then ours with a slow model call in flight.

Both servers index the seeded 5,000-document corpus (benchmarks/corpus.py) and serve the same
surface (the original's tools), so every request gets the same answer from both. Keep-alive
clients (1, 4, 16, 64; asyncio, one connection each) send a fixed mix:

* `search`: MCP `tools/call query` with one `lex` sub-query and `rerank:false` (BM25),
* `get`: MCP `tools/call get` of a corpus file,
* `status`: MCP `tools/call status`,
* `rest`: REST `POST /query` with the same `lex` search,

in the proportions 4 : 3 : 1 : 2. A request is an error when the connection fails, the status
is not 200, or the reply is a JSON-RPC error or an `isError` result. Reported per level and
implementation: requests, errors, throughput (requests/s), p50 and p99 latency (ms), and the
server's peak RSS (VmHWM of its process tree).

Slow-model phase (ours only): ours is started again, on its default surface (whose reranker
scores with the model; the compat surface gives a model without a ranking head the original's
constant score and never runs it), with the 270M Gemma GGUF as its reranker
(`.models/gemma-3-270m-q4_k_m.gguf`); one client keeps a reranked `query` (seconds per call)
in flight at all times while `--slow-clients` clients (4) run the mix; `get` p99 must stay
under 50 ms. The same load without the slow request is measured first, for comparison.

    python -m benchmarks.bench_http                        # 5,000 docs, 6,000 requests per level
    python -m benchmarks.bench_http --docs 200 --requests 400 --levels 1,4   # smoke size
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import corpus as corpus_mod
from benchmarks.harness import (
    REPO,
    BenchError,
    Implementation,
    machine,
    original,
    ours,
    percentile,
    vm_hwm_kib,
)

DEFAULT_LEVELS = (1, 4, 16, 64)
MIX = ("search",) * 4 + ("get",) * 3 + ("status",) + ("rest",) * 2
SLOW_MODEL = REPO / ".models" / "gemma-3-270m-q4_k_m.gguf"
MCP_HEADERS = "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"


@dataclass
class Sample:
    kind: str
    seconds: float
    ok: bool


@dataclass
class Workload:
    queries: list[str]
    files: list[str]
    bodies: dict[str, list[bytes]] = field(default_factory=dict)
    spec: bool = False  # the default surface, whose `query` also wants its `query` text

    def build(self, port: int) -> None:
        """Pre-encoded requests per kind (the client should cost as little CPU as it can)."""

        def mcp(tool: str, arguments: dict[str, Any], n: int) -> bytes:
            message = {
                "jsonrpc": "2.0",
                "id": n,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
            return _request("/mcp", MCP_HEADERS, json.dumps(message), port)

        lex = [
            {"searches": [{"type": "lex", "query": q}], "limit": 10, "rerank": False}
            for q in self.queries
        ]
        tool_args = (
            [{**a, "query": q} for a, q in zip(lex, self.queries, strict=True)]
            if self.spec
            else lex
        )
        self.bodies = {
            "search": [mcp("query", a, n) for n, a in enumerate(tool_args)],
            "get": [mcp("get", {"file": f"bench/{f}"}, n) for n, f in enumerate(self.files)],
            "status": [mcp("status", {}, 1)],
            "rest": [
                _request("/query", "Content-Type: application/json\r\n", json.dumps(a), port)
                for a in lex
            ],
        }


def _request(path: str, headers: str, body: str, port: int) -> bytes:
    data = body.encode("utf-8")
    head = (
        f"POST {path} HTTP/1.1\r\nHost: localhost:{port}\r\n{headers}"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode("ascii") + data


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        return status, b"".join(parts)
    return status, await reader.readexactly(int(headers.get("content-length", "0")))


def _answer_ok(kind: str, status: int, body: bytes) -> bool:
    if status != 200:
        return False
    if kind == "rest":
        return body.startswith(b'{"results":')
    text = body.decode("utf-8", "replace")
    payload = text.split("data: ", 1)[1] if text.startswith("event:") else text
    try:
        reply = json.loads(payload)
    except ValueError:
        return False
    result = reply.get("result")
    return isinstance(result, dict) and not result.get("isError")


async def _client(
    port: int,
    workload: Workload,
    kinds: list[str],
    budget: list[int],
    samples: list[Sample],
    seed: int,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    counters = {kind: itertools.count(seed) for kind in workload.bodies}
    try:
        for kind in itertools.cycle(kinds[seed % len(kinds) :] + kinds[: seed % len(kinds)]):
            if budget[0] <= 0:
                return
            budget[0] -= 1
            options = workload.bodies[kind]
            request = options[next(counters[kind]) % len(options)]
            started = time.perf_counter()
            try:
                writer.write(request)
                status, body = await _read_response(reader)
                ok = _answer_ok(kind, status, body)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                ok = False
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            samples.append(Sample(kind, time.perf_counter() - started, ok))
    finally:
        writer.close()


async def _slow_client(port: int, words: list[str], stop: asyncio.Event, done: list[float]) -> None:
    """Reranked queries one after another, each for another word (reranker scores are
    cached per query and passage, so a repeated query would not run the model)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for word in itertools.cycle(words):
            if stop.is_set():
                return
            message = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "query",
                    "arguments": {
                        "query": word,
                        "searches": [{"type": "lex", "query": word}],
                        "limit": 3,
                        "candidateLimit": 3,
                    },
                },
            }
            request = _request("/mcp", MCP_HEADERS, json.dumps(message), port)
            started = time.perf_counter()
            writer.write(request)
            status, body = await _read_response(reader)
            if not _answer_ok("search", status, body):
                raise BenchError(f"the slow model request failed: {status} {body[:300]!r}")
            done.append(time.perf_counter() - started)
    finally:
        writer.close()


async def _load(
    port: int, workload: Workload, clients: int, requests: int, kinds: list[str]
) -> tuple[list[Sample], float]:
    samples: list[Sample] = []
    budget = [requests]
    started = time.perf_counter()
    await asyncio.gather(
        *(_client(port, workload, kinds, budget, samples, n) for n in range(clients))
    )
    return samples, time.perf_counter() - started


def _summary(samples: list[Sample], seconds: float) -> dict[str, Any]:
    latencies = [s.seconds for s in samples]
    by_kind = {}
    for kind in sorted({s.kind for s in samples}):
        mine = [s.seconds for s in samples if s.kind == kind]
        by_kind[kind] = {
            "n": len(mine),
            "p50_ms": round(percentile(mine, 50) * 1000, 2),
            "p99_ms": round(percentile(mine, 99) * 1000, 2),
        }
    return {
        "requests": len(samples),
        "errors": sum(1 for s in samples if not s.ok),
        "seconds": round(seconds, 2),
        "throughput_rps": round(len(samples) / seconds, 1),
        "p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
        "by_kind": by_kind,
    }


class Server:
    def __init__(self, impl: Implementation, args: list[str], port: int) -> None:
        self.impl, self.port = impl, port
        self.log = impl.home / f"http-{port}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*impl.command, *args, "--port", str(port)],
                env=impl.env,
                cwd=impl.home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(f"{impl.label} server exited: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise BenchError(f"{impl.label} server did not listen on {port}")

    def rss_mib(self) -> float | None:
        kib = vm_hwm_kib(self.process.pid)
        return round(kib / 1024, 1) if kib else None

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.process.pid, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _index(impl: Implementation, root: Path) -> None:
    done, seconds = impl.run("collection", "add", str(root), "--name", "bench")
    if done.returncode != 0:
        raise BenchError(f"{impl.label}: collection add failed: {done.stderr[-1000:]}")
    print(f"  {impl.label}: indexed in {seconds:.1f} s", file=sys.stderr)


def _levels(args: argparse.Namespace) -> list[int]:
    return [int(x) for x in args.levels.split(",")]


def run(args: argparse.Namespace) -> dict[str, Any]:
    started_on = machine()
    scratch = Path(tempfile.mkdtemp(prefix="qmd-bench-http-"))
    try:
        written = corpus_mod.generate(scratch / "corpus", docs=args.docs, queries=args.queries)
        workload = Workload(written.queries, written.files[:: max(1, len(written.files) // 200)])
        impls = {"ours": ours(scratch / "ours", {"QMD_RERANK_MODEL": str(SLOW_MODEL)})}
        if not args.ours_only:
            impls["original"] = original(scratch / "original")
        for impl in impls.values():
            _index(impl, written.root)
        report: dict[str, Any] = {
            "machine": started_on,
            "docs": args.docs,
            "requests_per_level": args.requests,
            "mix": "search 4 : get 3 : status 1 : rest 2",
            "levels": {},
        }
        launch = {
            # a reranked query takes seconds on a loaded CPU: allow it more than 30 s
            "ours": ["mcp", "--http", "--compat", "2.8.3", "--request-timeout", "300"],
            "original": ["mcp", "--http"],
        }
        for label, impl in impls.items():
            port = _free_port()
            server = Server(impl, launch[label], port)
            try:
                workload.build(port)
                asyncio.run(_load(port, workload, 4, 200, list(MIX)))  # warm-up
                for clients in _levels(args):
                    samples, seconds = asyncio.run(
                        _load(port, workload, clients, args.requests, list(MIX))
                    )
                    figures = _summary(samples, seconds)
                    figures["server_rss_mib"] = server.rss_mib()
                    report["levels"].setdefault(str(clients), {})[label] = figures
                    print(
                        f"  {label:8} {clients:3} clients: {figures['throughput_rps']:7.1f} req/s"
                        f"  p50 {figures['p50_ms']:7.2f} ms  p99 {figures['p99_ms']:7.2f} ms"
                        f"  errors {figures['errors']}  RSS {figures['server_rss_mib']} MiB",
                        file=sys.stderr,
                    )
            finally:
                server.stop()
            if label == "ours" and not args.no_slow:
                # The default surface: its reranker scores with the model's yes/no logits. The
                # compat surface follows the original, which gives every candidate a constant
                # score when the model has no ranking head (the Gemma here has none), so a
                # "slow" query there would never run the model.
                port = _free_port()
                server = Server(impl, ["mcp", "--http", "--request-timeout", "300"], port)
                try:
                    spec_load = Workload(workload.queries, workload.files, spec=True)
                    spec_load.build(port)
                    asyncio.run(_load(port, spec_load, 4, 200, list(MIX)))  # warm-up
                    words = _distinct_words(written.root, written.files[:50])
                    report["slow_model"] = _slow_phase(port, spec_load, words, args)
                finally:
                    server.stop()
        return report
    finally:
        if args.keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def _distinct_words(root: Path, files: list[str]) -> list[str]:
    words: set[str] = set()
    for name in files:
        words.update(w for w in (root / name).read_text().split() if w.isalpha() and len(w) > 6)
    return sorted(words)


def _slow_phase(
    port: int, workload: Workload, words: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    if not SLOW_MODEL.is_file():
        raise BenchError(f"{SLOW_MODEL} is missing; run: python scripts/prepare_models.py")

    async def phase() -> tuple[list[Sample], float, list[float]]:
        stop = asyncio.Event()
        slow_done: list[float] = []
        # one reranked query first, so the model is loaded before the clock starts
        warm = asyncio.ensure_future(_slow_client(port, words, stop, slow_done))
        while not slow_done:
            if warm.done():
                warm.result()  # raises why the slow client stopped
                raise BenchError("the slow client stopped before its first answer")
            await asyncio.sleep(0.05)
        samples, seconds = await _load(
            port, workload, args.slow_clients, args.slow_requests, list(MIX)
        )
        stop.set()
        await warm
        return samples, seconds, slow_done

    calm, calm_seconds = asyncio.run(
        _load(port, workload, args.slow_clients, args.slow_requests, list(MIX))
    )
    samples, seconds, slow = asyncio.run(phase())
    figures = _summary(samples, seconds)
    figures["clients"] = args.slow_clients
    figures["without_slow_request"] = _summary(calm, calm_seconds)
    figures["slow_calls_completed"] = len(slow) - 1
    figures["slow_call_median_s"] = round(sorted(slow)[len(slow) // 2], 2)
    print(
        f"  ours with a slow reranked query in flight (median {figures['slow_call_median_s']} s,"
        f" {figures['slow_calls_completed']} done): get p99 {figures['by_kind']['get']['p99_ms']}"
        f" ms (without it: {figures['without_slow_request']['by_kind']['get']['p99_ms']} ms),"
        f" {figures['throughput_rps']} req/s, errors {figures['errors']}",
        file=sys.stderr,
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=corpus_mod.DEFAULT_DOCS)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--requests", type=int, default=6000, help="requests per level")
    parser.add_argument("--slow-requests", type=int, default=3000)
    parser.add_argument(
        "--slow-clients", type=int, default=4, help="clients beside the slow request (4)"
    )
    parser.add_argument("--levels", default=",".join(map(str, DEFAULT_LEVELS)))
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--no-slow", action="store_true", help="skip the slow-model phase")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    try:
        report = run(args)
    except BenchError as error:
        print(f"bench_http: {error}", file=sys.stderr)
        return 2
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
