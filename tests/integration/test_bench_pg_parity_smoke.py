"""benchmarks/bench_pg_parity.py still runs end to end on the tldr judged set it ships with
(a few pages and questions), so the parity figures of issue 36 cannot rot unseen."""

from __future__ import annotations

import contextlib
import io

import pytest

from benchmarks import bench_pg_parity
from tests.postgres_server import server_url

pytestmark = pytest.mark.postgres


def test_the_tldr_set_runs_on_both_backends_and_agrees() -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = bench_pg_parity.main(
            ["--set", "tldr", "--docs", "60", "--queries", "12", "--pg-url", server_url()]
        )
    out = printed.getvalue()
    assert code == 0, out
    assert "tldr: " in out and "scifact" not in out, out
    assert "top-5 sets agree 12/12" in out and "nDCG@10 gap 0.0000" in out, out
    assert "all targets met" in out, out
