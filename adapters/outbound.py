"""What every outbound HTTP exchange shares (the LDIMS backend's client,
adapters/ldims_api/client.py; the remote model client, adapters/models/http_json.py): one
deadline for the whole exchange, and strict reading of the JSON that comes back
(REQ-LDIMS-DEPLOY-006, REQ-LDIMS-DEPLOY-007, REQ-SEARCH-OUTBOUND-001).

A socket timeout bounds one operation, not an exchange: a server that sends one byte every
two seconds never trips a 30 s read timeout and holds the worker thread for as long as it
likes. So an exchange runs under `bounded`: a watchdog thread shuts its socket down when the
deadline passes, or within `CHECK_EVERY_S` once the request it serves is given up (its stop
check raises); the read blocked on that socket returns at once, and the exchange fails as
`ExchangeTimeoutError` (or the stop check's own error). The worker goes back to its pool then,
whatever the server does. The shut-down socket is never reused.

Reading: `strict_json` refuses what JSON's grammar does not allow but Python's decoder takes
(`NaN`, `Infinity`, numbers beyond a double), and nesting deeper than `MAX_JSON_DEPTH`, so
nothing a server sends can put a non-finite number into an answer we write or a structure
deep enough to exhaust the stack of whoever walks it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "CHECK_EVERY_S",
    "MAX_JSON_DEPTH",
    "Exchange",
    "ExchangeTimeoutError",
    "bounded",
    "origin",
    "strict_dumps",
    "strict_json",
]

CHECK_EVERY_S = 0.05  # how soon an exchange whose request was given up is abandoned
MAX_JSON_DEPTH = 64  # as a frame from a client may nest (REQ-WIRE-DEPTH-001)


class ExchangeTimeoutError(TimeoutError):
    """The exchange did not finish by its deadline; its socket has been shut down."""


class Exchange:
    """One exchange under watch: `attach` the socket once it exists; the watchdog `abandon`s
    it (shuts the socket down) at the deadline or when the stop check raises."""

    def __init__(
        self, deadline: float, stop_check: Callable[[], None] | None, context: contextvars.Context
    ) -> None:
        self.deadline = deadline
        self.started = time.monotonic()
        self._stop_check = stop_check
        self._context = context
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.expired = False  # the deadline passed
        self.stopped: BaseException | None = None  # what the stop check raised

    @property
    def abandoned(self) -> bool:
        return self.expired or self.stopped is not None

    def left(self) -> float:
        """Seconds until the deadline (at least a millisecond: a socket timeout of 0 would
        make the socket non-blocking instead of failing it)."""
        return max(0.001, self.deadline - time.monotonic())

    def attach(self, sock: socket.socket | None) -> None:
        """The exchange's socket, shut down at once if the exchange is abandoned already."""
        with self._lock:
            self._sock = sock
            abandoned = self.abandoned
        if abandoned:
            self._shut()
        elif sock is not None:
            sock.settimeout(self.left())

    def due(self, now: float) -> bool:
        """Whether the watchdog must abandon the exchange now (called on its thread)."""
        if now >= self.deadline:
            self.expired = True
            return True
        # first asked one period in: an exchange that ends sooner (most on loopback) costs
        # no call, and the model client has asked just before its attempt anyway
        if self._stop_check is not None and now - self.started >= CHECK_EVERY_S:
            try:
                # the check reads the request the exchange serves from the caller's context
                self._context.run(self._stop_check)
            except Exception as error:  # the stop check's way of saying "given up"
                self.stopped = error
                return True
        return False

    def _shut(self) -> None:
        with self._lock:
            sock = self._sock
        if sock is None:
            return
        with contextlib.suppress(OSError):
            # socket.socket's own shutdown, also for a TLS socket: the blocked read returns
            # without the TLS object being torn down under it
            socket.socket.shutdown(sock, socket.SHUT_RDWR)

    @property
    def watches_requests(self) -> bool:
        return self._stop_check is not None


class _Watchdog:
    """One daemon thread for every exchange in progress: it sleeps until the nearest deadline
    (or `CHECK_EVERY_S` while an exchange has a stop check) and abandons those that are due."""

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._watched: set[Exchange] = set()
        self._thread: threading.Thread | None = None

    def watch(self, exchange: Exchange) -> None:
        with self._wake:
            self._watched.add(exchange)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="qmd-outbound-watchdog", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def forget(self, exchange: Exchange) -> None:
        with self._wake:
            self._watched.discard(exchange)

    def _run(self) -> None:
        while True:
            with self._wake:
                now = time.monotonic()
                due = [e for e in self._watched if e.due(now)]
                self._watched.difference_update(due)
                if not due:  # sleep under the lock: a new exchange wakes it
                    if not self._watched:
                        self._wake.wait()
                        continue
                    wait = min(e.deadline for e in self._watched) - now
                    if any(e.watches_requests for e in self._watched):
                        wait = min(wait, CHECK_EVERY_S)
                    self._wake.wait(max(0.0, wait))
                    continue
            for exchange in due:
                exchange._shut()


_WATCHDOG = _Watchdog()


@contextlib.contextmanager
def bounded(seconds: float, stop_check: Callable[[], None] | None = None) -> Iterator[Exchange]:
    """Run one exchange that must end within `seconds`: `attach` its socket as soon as it
    is connected. Whatever the block raises once the exchange has been abandoned becomes
    `ExchangeTimeoutError` (past the deadline) or the stop check's error (given up); a block
    that returns normally after being abandoned (a body read to a shut-down end) raises too,
    as its answer may be cut short."""
    exchange = Exchange(
        time.monotonic() + max(0.0, seconds), stop_check, contextvars.copy_context()
    )
    _WATCHDOG.watch(exchange)
    try:
        yield exchange
    except Exception as error:
        if exchange.abandoned:
            raise _abandoned(exchange, seconds) from error
        raise
    finally:
        _WATCHDOG.forget(exchange)
    if exchange.abandoned:
        raise _abandoned(exchange, seconds)


def _abandoned(exchange: Exchange, seconds: float) -> BaseException:
    if exchange.stopped is not None:
        return exchange.stopped
    return ExchangeTimeoutError(f"no complete answer within {seconds:g} s")


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in: a redirect may go
    only where this is the same (REQ-LDIMS-DEPLOY-007)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: no origin we could be at
        return (scheme, "", -1)
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return (scheme, (parts.hostname or "").lower(), port)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_json(raw: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`raw` decoded as strict JSON (RFC 8259): ValueError for a syntax error, bytes that are
    not UTF-8, `NaN`/`Infinity`/`-Infinity`, a number beyond a double, or arrays and objects
    nested deeper than `max_depth`."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:  # deeper than the decoder's own stack allows
        raise ValueError(f"nested deeper than {max_depth} levels") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8: {error}") from None
    _check_tree(value, max_depth)
    return value


def _check_tree(value: Any, limit: int) -> None:
    """ValueError if arrays and objects nest deeper than `limit`, or a number overflowed to
    infinity (a literal beyond a double, which the decoder takes); walked without recursion,
    one pass for both."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        children: Any = item.values() if isinstance(item, dict) else item
        if depth > limit:
            raise ValueError(f"nested deeper than {limit} levels")
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
            elif isinstance(child, float) and not math.isfinite(child):
                raise ValueError("a number out of range")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("a number out of range")


def strict_dumps(value: Any, **options: Any) -> str:
    """`json.dumps` that refuses a non-finite number (ValueError) instead of writing `NaN`."""
    return json.dumps(value, allow_nan=False, **options)
