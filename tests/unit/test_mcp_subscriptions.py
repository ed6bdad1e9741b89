"""Resource subscriptions shared by sessions (REQ-MCP-SSE-005) and the capability a
connection declares for them (REQ-MCP-SSE-006), in process."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.mcp.dispatch import Dispatcher
from adapters.mcp.protocol import Session, served_capabilities
from adapters.mcp.spec import SpecSurface
from adapters.mcp.subscriptions import Notify, SubscriptionHub
from adapters.mcp.wording import JsonRpcError
from tests.fakes import InMemoryStore, app_over


class WatchedSurface(SpecSurface):
    """The spec surface plus one watcher per URI, as a surface with subscriptions keeps them."""

    subscribable = True

    def __init__(self) -> None:
        super().__init__(app_over(InMemoryStore()).services(), "9.9.9")
        self.watchers: dict[str, Notify] = {}

    def subscribe(self, uri: str, notify: Notify) -> None:
        if not uri.startswith("qmd://"):
            raise JsonRpcError(-32602, f"Resource not found: {uri}")
        self.watchers[uri] = notify

    def unsubscribe(self, uri: str) -> None:
        self.watchers.pop(uri, None)

    def change(self, uri: str) -> None:
        notify = self.watchers.get(uri)
        if notify is not None:
            notify("notifications/resources/updated", {"uri": uri})


def _initialize(session: Session) -> dict[str, Any]:
    reply = session.handle_message(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}},
        }
    )
    assert reply is not None
    result: dict[str, Any] = reply["result"]["capabilities"]
    return result


def _request(session: Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
    reply = session.handle_message({"jsonrpc": "2.0", "id": 2, "method": method, "params": params})
    assert reply is not None
    return reply


def test_every_session_watching_a_uri_hears_of_it_and_a_dropped_one_does_not() -> None:
    surface = WatchedSurface()
    hub = SubscriptionHub(surface)
    heard: dict[str, list[str]] = {"a": [], "b": []}
    sessions = {}
    for name in heard:
        session = Session(
            surface,
            emit=lambda message, name=name: heard[name].append(message["params"]["uri"]),
            subscriptions=hub,
        )
        sessions[name] = session
        assert _request(session, "resources/subscribe", {"uri": "qmd://d/x"})["result"] == {}
    surface.change("qmd://d/x")
    assert heard == {"a": ["qmd://d/x"], "b": ["qmd://d/x"]}
    _request(sessions["a"], "resources/unsubscribe", {"uri": "qmd://d/x"})
    surface.change("qmd://d/x")
    assert heard["a"] == ["qmd://d/x"] and len(heard["b"]) == 2
    assert "qmd://d/x" in surface.watchers  # b still watches: the surface keeps watching
    hub.drop(sessions["b"])
    assert surface.watchers == {} and hub.watching(sessions["b"]) == []


def test_a_uri_the_surface_refuses_registers_nothing() -> None:
    surface = WatchedSurface()
    hub = SubscriptionHub(surface)
    session = Session(surface, emit=lambda _message: None, subscriptions=hub)
    refused = _request(session, "resources/subscribe", {"uri": "file:///etc/passwd"})
    assert refused["error"]["code"] == -32602
    assert hub.watching(session) == [] and surface.watchers == {}


@pytest.mark.parametrize(
    ("stateless", "stream", "declared"),
    [(False, True, True), (False, False, False), (True, True, False)],
    ids=["stream", "no-stream", "stateless"],
)
def test_subscribe_is_declared_only_where_the_connection_serves_it(
    stateless: bool, stream: bool, declared: bool
) -> None:
    emit = (lambda _message: None) if stream else None
    session = Session(WatchedSurface(), stateless=stateless, emit=emit)
    capabilities = _initialize(session)
    assert capabilities["resources"].get("subscribe", False) is declared
    answered = _request(session, "resources/subscribe", {"uri": "qmd://d/x"})
    assert ("result" in answered) is declared


def test_the_2026_era_declares_no_subscribe() -> None:
    session = Session(WatchedSurface(), emit=lambda _message: None)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    discovered = _request(session, "server/discover", {"_meta": meta})
    assert "subscribe" not in discovered["result"]["capabilities"]["resources"]


def test_served_capabilities_keeps_everything_else() -> None:
    declared = {"resources": {"subscribe": True, "listChanged": False}, "tools": {}}
    assert served_capabilities(declared, True) is declared
    assert served_capabilities(declared, False) == {
        "resources": {"listChanged": False},
        "tools": {},
    }
    assert declared["resources"] == {"subscribe": True, "listChanged": False}  # not mutated


def test_a_connection_run_on_workers_still_declares_what_it_serves() -> None:
    """The legacy SSE session answers `initialize` on a (stateless) worker session: what it
    declares follows the connection that admitted it, not the worker."""
    from adapters.mcp.protocol import CONNECTION_METHODS
    from adapters.mcp.workers import Worker, WorkerPools

    def open_worker() -> Worker:
        services = app_over(InMemoryStore()).services()
        return Worker(
            Session(WatchedSurface(), stateless=True), services, lambda: None, lambda: None
        )

    pools = WorkerPools(open_worker, threads=1, model_threads=1)
    written: list[dict[str, Any]] = []
    connection = Session(WatchedSurface(), emit=written.append)
    dispatcher = Dispatcher(connection, written.append, pools, None, inline=CONNECTION_METHODS)
    try:
        dispatcher.feed(
            connection.admit(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": "2024-11-05", "capabilities": {}},
                }
            )
        )
        assert dispatcher.wait_idle(10)
        assert written[0]["result"]["capabilities"]["resources"]["subscribe"] is True
    finally:
        pools.shutdown()
