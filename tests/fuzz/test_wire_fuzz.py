"""The wire fuzzer's CI budget: real `qmd mcp` processes on both surfaces, every reply judged
by the docs/spec oracle (tests/fuzz/oracle.py), not merely "did not crash".

The long run is `scripts/fuzz_wire.py --frames 100000` (docs/reliability.md has its figures).
"""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import driver, oracle
from tests.fuzz import frames as gen

CI_FRAMES = 2000  # per surface; about 15-20 s each on a loaded 2-core machine
SURFACES = [pytest.param(False, id="spec"), pytest.param(True, id="compat")]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return driver.fuzz_env(tmp_path_factory.mktemp("fuzz"))


@pytest.mark.parametrize("compat", SURFACES)
def test_a_fixed_budget_of_fuzzed_frames_meets_the_oracle(
    env: dict[str, str], compat: bool, tmp_path: Path
) -> None:
    report = driver.run(env, compat, CI_FRAMES, seed=2026, crash_dir=tmp_path / "crashes")
    print(report.summary())
    assert report.frames == CI_FRAMES
    assert report.replies > CI_FRAMES // 2  # the oracle saw real answers, not silence
    assert report.clean, "\n".join([report.summary(), *report.examples])


class _Live:
    """One server per surface for the hypothesis examples (a process per example is slow)."""

    def __init__(self, env: dict[str, str], compat: bool) -> None:
        self.env, self.compat = env, compat
        self.server = driver.Server(env, ["--compat", "2.8.3"] if compat else [])
        self.tools = driver._tools(self.server)
        self.report = driver.Report("compat-2.8.3" if compat else "spec")

    def send(self, lines: list[bytes]) -> None:
        alive = driver._send_batch(self.server, lines, self.compat, self.report, 10.0)
        if not alive:
            self.server.stop()
            self.server = driver.Server(self.env, ["--compat", "2.8.3"] if self.compat else [])
            driver._tools(self.server)


@pytest.fixture(scope="module", params=SURFACES)
def live(env: dict[str, str], request: pytest.FixtureRequest) -> Iterator[_Live]:
    server = _Live(env, request.param)
    yield server
    server.server.stop()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_hypothesis_drawn_frames_meet_the_oracle(live: _Live, data: st.DataObject) -> None:
    source = gen.HypothesisSource(data)
    lines = [gen.frame(source, live.tools, n) for n in range(data.draw(st.integers(1, 5)))]
    before = (live.report.crashes, live.report.hangs, live.report.non_strict)
    violations = live.report.violations
    live.send(lines)
    after = (live.report.crashes, live.report.hangs, live.report.non_strict)
    assert after == before and live.report.violations == violations, live.report.examples[-3:]


@pytest.mark.parametrize(
    ("line", "spec_code"),
    [
        (b'{"jsonrpc":"2.0","id":"\\udc00","method":"ping"}', -32600),
        (b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}', -32600),
        (b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', -32700),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","x":' + b"[" * 5000 + b"]" * 5000 + b"}",
         -32600),
        (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get",'
         b'"arguments":{"file":"a.md","fromLine":1e999}}}', -32602),
        (b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"status",'
         b'"arguments":{"x":"\\ud800"}}}', -32602),
        (b'{"jsonrpc":"2.0","id":4,"method":"ping","params":{"q":"\xff"}}', -32700),
    ],
)  # fmt: skip
def test_frames_that_took_the_old_server_down_are_answered_by_the_oracle(
    env: dict[str, str], line: bytes, spec_code: int
) -> None:
    """Regression: each of these exited the server or wrote non-JSON before issue 11."""
    assert oracle.expect(line, answers_malformed=True).code == spec_code
    for compat in (False, True):
        report = driver.Report("regression")
        server = driver.Server(env, ["--compat", "2.8.3"] if compat else [])
        try:
            driver._tools(server)
            assert driver._send_batch(server, [line], compat, report, 10.0)
        finally:
            server.stop()
        assert report.clean, report.examples


REGRESSIONS = Path(__file__).parent / "regressions"


@pytest.mark.parametrize("compat", SURFACES)
def test_every_frame_the_fuzzer_ever_crashed_a_server_with_is_answered_by_the_oracle(
    env: dict[str, str], compat: bool
) -> None:
    """Frames isolated from fuzz runs that made a server exit (one file per build that had
    the defect); each is replayed on both surfaces and judged like any fuzzed frame."""
    lines = [
        line
        for corpus in sorted(REGRESSIONS.glob("*.jsonl"))
        for line in corpus.read_bytes().splitlines()
        if line
    ]
    assert lines
    report = driver.Report("regressions")
    server = driver.Server(env, ["--compat", "2.8.3"] if compat else [])
    try:
        driver._tools(server)
        assert driver._send_batch(server, lines, compat, report, 10.0)
    finally:
        server.stop()
    assert report.clean, report.examples


# Two frames of one hypothesis batch that once failed it: a request with id 0, and an invalid
# (`"jsonrpc":"1.0"`) frame whose id `-0` is the same JSON number, so both replies carry id 0.
SHARED_ID_BATCH = [
    b'{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"status","arguments":{}}}',
    b'{"jsonrpc":"1.0","id":-0,"method":"ping"}',
]
STATUS_RESULT = b'{"jsonrpc":"2.0","id":0,"result":{"content":[]}}'
INVALID_REQUEST = b'{"jsonrpc":"2.0","id":0,"error":{"code":-32600,"message":"Invalid Request"}}'


class ScriptedPeer:
    """A server stand-in that writes given reply lines, in the given order, to each batch,
    then the batch's sync reply: the order a concurrent server may pick, made certain."""

    def __init__(self, replies: list[bytes]) -> None:
        self.replies = replies
        self.lines: queue.Queue[bytes | None] = queue.Queue()

    def write(self, data: bytes) -> bool:
        sync_id = json.loads(data.splitlines()[-1])["id"]
        for reply in self.replies:
            self.lines.put(reply + b"\n")
        sync = {"jsonrpc": "2.0", "id": sync_id, "result": {"tools": []}}
        self.lines.put(json.dumps(sync).encode() + b"\n")
        return True


def _judged(replies: list[bytes], lines: list[bytes] = SHARED_ID_BATCH) -> driver.Report:
    report = driver.Report("scripted")
    assert driver._send_batch(ScriptedPeer(replies), lines, False, report, 10.0)
    return report


@pytest.mark.parametrize(
    "replies",
    [[STATUS_RESULT, INVALID_REQUEST], [INVALID_REQUEST, STATUS_RESULT]],
    ids=["request-first", "invalid-frame-first"],
)
def test_replies_sharing_an_id_are_paired_so_that_each_is_right(replies: list[bytes]) -> None:
    """Regression: the invalid frame's -32600, answered at once, used to be paired with the
    request still running (which may get any error), and the request's late result was then
    judged against the invalid frame: a violation by the harness, not the server."""
    report = _judged(replies)
    assert (report.replies, report.violations) == (3, 0), report.examples  # and the sync


@pytest.mark.parametrize("late", [0, 1], ids=["first", "second"])
def test_serving_the_invalid_frame_is_still_a_violation_in_either_order(late: int) -> None:
    """No pairing makes two results right when one frame is owed -32600."""
    served = b'{"jsonrpc":"2.0","id":0,"result":{}}'
    report = _judged([STATUS_RESULT, served][:: 1 - 2 * late])
    assert report.violations == 1, report.examples
    assert "expected error -32600" in report.examples[0]


def test_a_reply_more_than_the_frames_with_its_id_is_a_violation() -> None:
    report = _judged([INVALID_REQUEST, STATUS_RESULT, INVALID_REQUEST])
    assert report.violations == 1 and "unexpected reply" in report.examples[0], report.examples


def test_a_reply_with_an_id_no_frame_carries_is_a_violation() -> None:
    report = _judged([INVALID_REQUEST, STATUS_RESULT.replace(b'"id":0', b'"id":7')])
    assert report.violations == 1 and "reply id 7 != 0" in report.examples[0], report.examples


def test_the_shared_id_batch_meets_the_oracle_on_a_real_server(env: dict[str, str]) -> None:
    """The server's half: both surfaces answer the pair rightly, whichever reply comes first
    (the default surface answers the invalid frame -32600 with its id; compat drops it)."""
    for compat in (False, True):
        report = driver.Report("shared-id")
        server = driver.Server(env, ["--compat", "2.8.3"] if compat else [])
        try:
            driver._tools(server)
            for _ in range(10):
                assert driver._send_batch(server, SHARED_ID_BATCH, compat, report, 10.0)
        finally:
            server.stop()
        assert report.clean and report.replies == (20 if compat else 30), report.examples
