"""The per-connection reply budget (REQ-HTTP-LIMIT-007), in process on every registered
surface: a reply larger than the budget is not held but answered with error -32000 naming
it, framed as the replies would have been, in both eras."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from tests.guarantees import Exchange, Rig, legacy_call, modern_call, replies_of, served_surfaces

BUDGET = 200  # bytes: every surface's tools/list is larger


@pytest.mark.parametrize("surface", served_surfaces())
@pytest.mark.parametrize("era", ["2025", "2026-07-28"])
def test_a_reply_over_the_budget_is_answered_with_an_error(surface: str, era: str) -> None:
    rig = Rig(surface)
    pools = rig.pools()
    try:
        app = rig.http(pools)
        app.settings = dataclasses.replace(app.settings, max_queued_bytes=BUDGET)
        call = modern_call if era != "2025" else legacy_call
        body, headers = call("tools/list", {}, request_id=7)
        reply = asyncio.run(Exchange(app, body, headers).run())
        assert reply is not None and reply.status == 200
        [answer] = replies_of(reply)
        assert answer["id"] == 7 and answer["error"]["code"] == -32000
        assert answer["error"]["message"].startswith("Reply too large: ")
        assert f"({BUDGET} bytes, QMD_HTTP_MAX_QUEUED_BYTES)" in answer["error"]["message"]
        # within the budget, the same request is answered
        app.settings = dataclasses.replace(app.settings, max_queued_bytes=1 << 24)
        reply = asyncio.run(Exchange(app, body, headers).run())
        assert reply is not None and replies_of(reply)[0]["result"]["tools"]
    finally:
        pools.shutdown()
