"""Resource subscriptions of many sessions over one surface instance (REQ-MCP-SSE-005).

A surface keeps one watcher per URI (`subscribe(uri, notify)`, `unsubscribe(uri)`); a
transport whose sessions share a surface (the legacy HTTP+SSE transport: one stream per
session, one surface for all) puts this hub in front of it: the surface watches a URI while
at least one session does, and a change is told to every session watching it. A session
that ends is dropped from every URI at once, so nothing is sent to a stream that is gone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

Notify = Callable[[str, dict[str, Any]], None]

log = logging.getLogger("qmd.mcp")


class Watchable(Protocol):
    def subscribe(self, uri: str, notify: Notify) -> None: ...
    def unsubscribe(self, uri: str) -> None: ...


class SubscriptionHub:
    def __init__(self, surface: Watchable) -> None:
        self._surface = surface
        self._lock = threading.Lock()
        self._watchers: dict[str, dict[object, Notify]] = {}

    def subscribe(self, uri: str, holder: object, notify: Notify) -> None:
        """`holder` (a session) watches `uri`; the surface's refusal (a bad URI) propagates
        and nothing is registered."""
        with self._lock:
            watchers = self._watchers.get(uri)
            if watchers is None:
                self._surface.subscribe(uri, self._fan_out_for(uri))
                watchers = self._watchers[uri] = {}
            watchers[holder] = notify

    def unsubscribe(self, uri: str, holder: object) -> None:
        with self._lock:
            self._leave(uri, holder)

    def drop(self, holder: object) -> None:
        """The holder's session ended: it watches nothing any more."""
        with self._lock:
            for uri in [u for u, w in self._watchers.items() if holder in w]:
                self._leave(uri, holder)

    def watching(self, holder: object) -> list[str]:
        with self._lock:
            return sorted(u for u, w in self._watchers.items() if holder in w)

    def _leave(self, uri: str, holder: object) -> None:
        watchers = self._watchers.get(uri)
        if watchers is None or watchers.pop(holder, None) is None or watchers:
            return
        del self._watchers[uri]
        self._surface.unsubscribe(uri)

    def _fan_out_for(self, uri: str) -> Notify:
        def fan_out(method: str, params: dict[str, Any]) -> None:
            with self._lock:
                notifies = list(self._watchers.get(uri, {}).values())
            for notify in notifies:
                try:
                    notify(method, params)
                except Exception:  # one session's stream must not keep the others uninformed
                    log.exception("could not notify a subscriber of %s", uri)

        return fan_out
