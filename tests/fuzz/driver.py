"""Drive a real `qmd mcp` process with fuzzed frames and judge every reply by the oracle.

Frames are pipelined in batches, each closed by a sync `tools/list` request; the server
answers in order, so the replies between two syncs must be exactly the ones the oracle
expects. A reply that takes longer than `hang_seconds` is a hang; a process that exits is a
crash (its batch is kept, and the server restarted); RSS is sampled after every batch.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tests.fuzz import frames as gen
from tests.fuzz import oracle

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Report:
    surface: str
    frames: int = 0
    replies: int = 0
    crashes: int = 0
    hangs: int = 0
    non_strict: int = 0
    violations: int = 0
    internal_errors: int = 0
    seconds: float = 0.0
    max_frame_seconds: float = 0.0
    max_rss_mb: float = 0.0
    examples: list[str] = field(default_factory=list)
    slowest: bytes = b""

    def note(self, text: str) -> None:
        if len(self.examples) < 20:
            self.examples.append(text[:600])

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0

    @property
    def clean(self) -> bool:
        return not (self.crashes or self.hangs or self.non_strict or self.violations)

    def summary(self) -> str:
        return (
            f"{self.surface}: {self.frames} frames, {self.replies} replies, "
            f"{self.crashes} crashes, {self.hangs} hangs, {self.non_strict} non-strict replies, "
            f"{self.violations} oracle violations, {self.internal_errors} internal errors, "
            f"{self.frames_per_second:.0f} frames/s, slowest frame {self.max_frame_seconds:.2f} s, "
            f"peak RSS {self.max_rss_mb:.0f} MB"
        )


@dataclass(frozen=True)
class Profile:
    """Which surface a run fuzzes: the server's arguments, whether it drops malformed
    messages (the compat surface) and whether its tool errors carry the default surface's
    stable codes (None: where malformed messages are answered)."""

    name: str
    args: tuple[str, ...] = ()
    compat: bool = False
    tool_codes: bool | None = None

    @classmethod
    def legacy(cls, compat: bool) -> Profile:
        return cls("compat-2.8.3", ("--compat", "2.8.3"), True) if compat else cls("spec")


def answers_malformed(env: dict[str, str], surface: str, root: Path = REPO) -> bool:
    """Whether a surface answers a line that is not JSON (with -32700), asked of a real
    server: the fuzzer learns it from the wire, so a new surface needs no entry here."""
    server = Server(env, ["--surface", surface], root)
    try:
        server.write(b'not json\n{"jsonrpc":"2.0","id":"probe","method":"ping"}\n')
        first = server.lines.get(timeout=60)
        assert first is not None, f"--surface {surface} exited"
        reply = json.loads(first)
        return bool(reply.get("id") is None and reply.get("error", {}).get("code") == -32700)
    finally:
        server.stop()


def surface_profile(
    env: dict[str, str],
    surface: str,
    root: Path = REPO,
    documented_codes: frozenset[str] = frozenset({"spec"}),
) -> Profile:
    """The profile of any registered surface; `documented_codes`: the surfaces whose tool
    errors must carry the stable codes of docs/spec/mcp-tools.md."""
    compat = not answers_malformed(env, surface, root)
    return Profile(surface, ("--surface", surface), compat, surface in documented_codes)


def client_refusal(line: bytes) -> bytes | None:
    """A fuzzing client declines every request the server sends it (sampling): the answer to
    send back, or None when `line` is not a server-to-client request."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not (isinstance(message, dict) and "method" in message and "id" in message):
        return None
    error = {"code": -32601, "message": "Method not found: the fuzzing client does not sample"}
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}).encode()


class Wire(Protocol):
    """What a batch is sent over: a server's stdin, and its stdout's lines (None at its end)."""

    lines: queue.Queue[bytes | None]

    def write(self, data: bytes) -> bool: ...


class Server:
    def __init__(self, env: dict[str, str], args: list[str], root: Path = REPO) -> None:
        """`qmd mcp` from the checkout at `root` (another one to fuzz an older build)."""
        env = dict(env, PYTHONPATH=str(root))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli.main", "mcp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=root,
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def write(self, data: bytes) -> bool:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def rss_mb(self) -> float:
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return 0.0
        for row in status.splitlines():
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def _tools(server: Server) -> list[dict[str, Any]]:
    server.write(b'{"jsonrpc":"2.0","id":"tools","method":"tools/list"}\n')
    line = server.lines.get(timeout=60)
    assert line is not None, "server closed before tools/list"
    tools: list[dict[str, Any]] = json.loads(line)["result"]["tools"]
    return tools


def run(
    env: dict[str, str],
    compat: bool,
    frame_count: int,
    seed: int = 0,
    batch: int = 25,
    hang_seconds: float = 10.0,
    crash_dir: Path | None = None,
    source: gen.Source | None = None,
    server_root: Path = REPO,
    profile: Profile | None = None,
) -> Report:
    """Send `frame_count` fuzzed frames to one surface (`profile`, else spec or compat by
    `compat`); returns the tally."""
    profile = profile or Profile.legacy(compat)
    compat = profile.compat
    args = list(profile.args)
    report = Report(profile.name)
    source = source or gen.RandomSource(seed)
    server = Server(env, args, server_root)
    tools = _tools(server)
    started = time.monotonic()
    counter = 0
    try:
        while report.frames < frame_count:
            lines = [
                gen.frame(source, tools, counter + i)
                for i in range(min(batch, frame_count - report.frames))
            ]
            counter += len(lines)
            if not _send_batch(server, lines, compat, report, hang_seconds, profile.tool_codes):
                report.crashes += 1
                report.note(f"crash after batch ending at frame {report.frames}")
                if crash_dir is not None:
                    crash_dir.mkdir(parents=True, exist_ok=True)
                    (crash_dir / f"{report.surface}-{report.frames}.jsonl").write_bytes(
                        b"\n".join(lines) + b"\n"
                    )
                server.stop()
                server = Server(env, args, server_root)
                _tools(server)
            report.max_rss_mb = max(report.max_rss_mb, server.rss_mb())
    finally:
        report.seconds = time.monotonic() - started
        server.stop()
    return report


def _send_batch(
    server: Wire,
    lines: list[bytes],
    compat: bool,
    report: Report,
    hang_seconds: float,
    tool_codes: bool | None = None,
) -> bool:
    """One batch and its sync; False when the server died."""
    expectations = [oracle.expect(line, answers_malformed=not compat) for line in lines]
    sync_id = f"sync-{report.frames}"
    payload = b"".join(line + b"\n" for line in lines)
    payload += json.dumps({"jsonrpc": "2.0", "id": sync_id, "method": "tools/list"}).encode()
    writer = threading.Thread(target=server.write, args=(payload + b"\n",), daemon=True)
    sent_at = time.monotonic()
    writer.start()
    pairing = Pairing(
        [(index, e) for index, e in enumerate(expectations) if e.reply], not compat, tool_codes
    )
    report.frames += len(lines)
    last = sent_at
    synced = False
    while True:
        if synced and not pairing.outstanding:
            writer.join()
            return True
        try:
            raw = server.lines.get(timeout=hang_seconds)
        except queue.Empty:
            if synced:  # the sync came back, yet some requests were never answered
                report.violations += pairing.outstanding
                for index in pairing.unanswered:
                    report.note(f"no reply to: {lines[index][:300]!r}")
                writer.join()
                return True
            report.hangs += 1
            report.note(f"no reply within {hang_seconds} s; pending frames: {pairing.unanswered}")
            _show_batch(report, lines, pairing.oldest)
            return False
        now = time.monotonic()
        if now - last > report.max_frame_seconds:
            report.max_frame_seconds = now - last
            report.slowest = lines[pairing.oldest][:300] if pairing.outstanding else b""
        last = now
        if raw is None:
            _show_batch(report, lines, pairing.oldest)
            return False
        refusal = client_refusal(raw)
        if refusal is not None:  # the server asks the client something: not a reply
            threading.Thread(target=server.write, args=(refusal + b"\n",), daemon=True).start()
            continue
        report.replies += 1
        try:
            reply = oracle.strict_parse(raw.rstrip(b"\n"))
        except ValueError:
            report.non_strict += 1
            report.note(f"non-strict reply: {raw[:300]!r}")
            pairing.spend()
            continue
        if isinstance(reply, dict) and reply.get("id") == sync_id:
            # Requests run concurrently (docs/decisions/0033): the sync, answered at once,
            # may overtake replies still being computed; those are still due.
            synced = True
            continue
        if not pairing.outstanding:
            report.violations += 1
            report.note(f"unexpected reply {json.dumps(reply)[:200]}")
            continue
        index, problems = pairing.take(reply)
        if oracle.internal_error(reply):
            report.internal_errors += 1
            report.note(f"internal error: {json.dumps(reply)[:200]} for {lines[index][:300]!r}")
        if problems:
            report.violations += 1
            report.note(f"{problems} for {lines[index][:300]!r} -> {json.dumps(reply)[:300]}")


class Pairing:
    """Which reply of a batch answers which of its frames. A client matches replies by id
    alone, and a batch may send one id twice (`0` and `-0`, `3` and `3.0`) while requests run
    concurrently (docs/decisions/0033): two replies with one id may come in either order, and
    that order says nothing of which frame each answers. So a reply is wrong only when no
    pairing of the batch's replies with its frames makes every one of them right: each reply
    augments a maximum matching of replies to the frames they satisfy (Kuhn's algorithm), and
    a reply that matches nothing is a violation, judged against the frame it most likely
    answers. Pairing greedily instead gave a fast -32600 to a slow request with the same id,
    and then judged that request's late result against the invalid frame."""

    def __init__(
        self,
        due: list[tuple[int, oracle.Expectation]],
        answers_malformed: bool = True,
        tool_codes: bool | None = None,
    ) -> None:
        """`due`: (frame index, expectation) of each frame owed exactly one reply."""
        self._due = dict(due)
        self._answers_malformed = answers_malformed
        self._tool_codes = tool_codes
        self._fits: list[list[int]] = []  # per reply taken: the frames it would answer rightly
        self._holder: dict[int, int] = {}  # frame index -> the reply paired with it
        self._judged: set[int] = set()  # frames a wrong reply was judged against
        self._spent = 0  # replies that count as an answer but pair with no frame

    @property
    def outstanding(self) -> int:
        """How many replies are still owed."""
        return len(self._due) - len(self._holder) - self._spent

    @property
    def unanswered(self) -> list[int]:
        """The frames no reply has been paired with or judged against, oldest first."""
        return [i for i in self._due if i not in self._holder and i not in self._judged]

    @property
    def oldest(self) -> int:
        """The oldest frame without a reply paired with it (0 when there is none)."""
        return next((i for i in self._due if i not in self._holder), 0)

    def spend(self) -> None:
        """A reply that answers some frame but can be paired with none (it is not JSON)."""
        self._spent += 1

    def _carries_id(self, index: int, reply: Any) -> bool:
        expectation = self._due[index]
        reply_id = _reply_id(reply)
        if reply_id is None:  # replies to unreadable frames; those are written in order
            return expectation.id is None or expectation.id_may_be_null
        return oracle.same_id(expectation.id, reply_id)

    def _problems(self, index: int, reply: Any) -> list[str]:
        return oracle.violations(self._due[index], reply, self._answers_malformed, self._tool_codes)

    def take(self, reply: Any) -> tuple[int, list[str]]:
        """Pair one reply: the frame it answers and no problems, or, when no pairing makes it
        right, the frame it is judged against (one with its id, else the oldest) and what is
        wrong."""
        carriers = [i for i in self._due if self._carries_id(i, reply)]
        number = len(self._fits)
        self._fits.append([i for i in carriers if not self._problems(i, reply)])
        if self._augment(number, set()):
            return next(i for i, holder in self._holder.items() if holder == number), []
        self._spent += 1
        free = [i for i in carriers if i not in self._holder]
        index = (free or carriers or [self.oldest])[0]
        self._judged.add(index)
        if index not in self._due:
            return index, [f"unexpected reply with id {_reply_id(reply)!r}"]
        problems = self._problems(index, reply)
        if not problems:  # every frame it would satisfy already has its own reply
            problems = [f"one reply more with id {_reply_id(reply)!r} than frames sent with it"]
        return index, problems

    def _augment(self, number: int, seen: set[int]) -> bool:
        for index in self._fits[number]:
            if index in seen:
                continue
            seen.add(index)
            holder = self._holder.get(index)
            if holder is None or self._augment(holder, seen):
                self._holder[index] = number
                return True
        return False


def _reply_id(reply: Any) -> Any:
    return reply.get("id") if isinstance(reply, dict) else None


def _show_batch(report: Report, lines: list[bytes], index: int) -> None:
    report.note(f"frame: {lines[index][:300]!r}")


def fuzz_env(root: Path) -> dict[str, str]:
    """The fixture index under `root` (built once), and an environment for servers over it."""
    from tests.mcp_harness import build_fixture_index, fixture_env

    if not (root / "index.sqlite").exists():
        root.mkdir(parents=True, exist_ok=True)
        build_fixture_index(root)
    env = fixture_env(root)
    env.update(  # what the memorize and projmem surfaces read, kept under `root`
        QMD_MEMORY_DIR=str(root / "memory"),
        QMD_SESSIONS_DIR=str(root / "sessions"),
        QMD_SESSIONS_VAULT=str(root / "vault"),
    )
    return env
