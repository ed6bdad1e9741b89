"""The wire fuzzer's CI budget over HTTP: real `qmd mcp --http` servers on both surfaces, every
answer judged by the docs/spec oracle (tests/fuzz/http_oracle.py), not merely "did not crash".

The long run is `scripts/fuzz_wire.py --transport http --frames 100000` (docs/reliability.md
has its figures).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import driver, http_driver, http_frames, http_oracle
from tests.fuzz import frames as gen

CI_FRAMES = 600  # per surface; about 3 s each on an idle 2-core machine (15 s under load 20)
SURFACES = [pytest.param(False, id="spec"), pytest.param(True, id="compat")]
REGRESSIONS = Path(__file__).parent / "regressions" / "http"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return driver.fuzz_env(tmp_path_factory.mktemp("fuzz-http"))


@pytest.mark.parametrize("compat", SURFACES)
def test_a_fixed_budget_of_fuzzed_http_requests_meets_the_oracle(
    env: dict[str, str], compat: bool, tmp_path: Path
) -> None:
    report = http_driver.run(env, compat, CI_FRAMES, seed=2026, crash_dir=tmp_path / "crashes")
    print(report.summary())
    assert report.frames == CI_FRAMES
    assert report.replies == CI_FRAMES  # every request answered, each judged
    assert report.clean, "\n".join([report.summary(), *report.examples])


@pytest.fixture(scope="module", params=SURFACES)
def live(env: dict[str, str], request: pytest.FixtureRequest) -> Iterator[http_driver.Session]:
    session = http_driver.Session(env, request.param)
    yield session
    session.close()


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_hypothesis_drawn_http_requests_meet_the_oracle(
    live: http_driver.Session, data: st.DataObject
) -> None:
    source = gen.HypothesisSource(data)
    request = http_frames.request(source, live.tools, data.draw(st.integers(0, 10**6)))
    report = live.report
    before = (report.crashes, report.hangs, report.non_strict, report.violations)
    live.send(request)
    after = (report.crashes, report.hangs, report.non_strict, report.violations)
    assert after == before, report.examples[-3:]


@pytest.mark.parametrize("compat", SURFACES)
def test_bodies_over_the_limit_get_413_and_the_server_goes_on(
    env: dict[str, str], compat: bool
) -> None:
    session = http_driver.Session(env, compat)
    try:
        for path in ("/mcp", "/query"):
            for chunked in (False, True):
                request = http_frames.huge_request(gen.RandomSource(0))
                request.target, request.chunked = path, chunked
                assert http_oracle.expect(request, compat).status == 413
                assert session.send(request)
                health = http_frames.HttpRequest("GET", "/health")
                assert session.send(health)
        assert session.report.clean, session.report.examples
        assert session.report.replies == 8
    finally:
        session.close()


def _regressions() -> list[http_frames.HttpRequest]:
    found = []
    for corpus in sorted(REGRESSIONS.glob("*.jsonl")):
        for line in corpus.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            found.append(
                http_frames.HttpRequest(
                    record["method"],
                    record["target"],
                    dict(record["headers"]),
                    record["body"].encode("latin-1"),
                )
            )
    return found


@pytest.mark.parametrize("compat", SURFACES)
def test_every_request_the_fuzzer_ever_broke_a_server_with_meets_the_oracle(
    env: dict[str, str], compat: bool
) -> None:
    """Requests isolated from HTTP fuzz runs (one file per build that had the defect),
    replayed on both surfaces and judged like any fuzzed request."""
    requests = _regressions()
    assert requests
    session = http_driver.Session(env, compat)
    try:
        for request in requests:
            session.send(request)
    finally:
        session.close()
    assert session.report.clean, session.report.examples
    assert session.report.replies == len(requests)


def test_the_oracle_names_the_spec_answer_for_each_regression() -> None:
    """What the spec says each regression request gets (the server must agree, above)."""
    statuses = [http_oracle.expect(r, compat=False) for r in _regressions()]
    assert [(e.kind, e.status, e.code) for e in statuses] == [
        ("error", 400, -32600),
        ("error", 400, -32600),
        ("error", 400, -32600),
        ("error", 400, -32600),
        ("dispatch", 200, None),
        ("dispatch", 200, None),
        ("rest", 200, None),
        ("rest", 200, None),
    ]
    assert statuses[4].replies[0].code == -32602  # REQ-WIRE-PARAMS-001: beyond a double
    assert statuses[6].malformed and statuses[7].malformed
