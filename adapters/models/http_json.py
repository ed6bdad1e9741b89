"""A small JSON-over-HTTP client for model servers, on the standard library (ADR 0013).

* One keep-alive connection per thread and host (`http.client`), so a batch of requests on
  loopback costs no handshakes; a connection that failed is dropped and opened again.
* Each attempt is bounded by `timeout` seconds for the whole exchange, connect, send and
  every read together (adapters/outbound.py, REQ-SEARCH-OUTBOUND-001): a server that drips
  its answer cannot hold the caller longer; a timeout is not retried, so the caller hears
  about a stuck server within the configured time. An attempt whose request is given up is
  abandoned within 50 ms.
* Answers are read as strict JSON (no `NaN`/`Infinity`, nothing nested past 64 levels) and
  requests written so; redirects are not followed (a 3xx is an error status).
* 429 and 5xx answers and refused or reset connections are retried with exponential backoff,
  honouring `Retry-After`; a wait longer than `timeout` is not taken (the error says why).
* Failures are `QmdError(MODEL_UNAVAILABLE)` naming the URL without credentials and the
  reason; the API key never appears in a message, even when the server echoes it.
"""

from __future__ import annotations

import email.utils
import http.client
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters.models.idle import WAIT_CHECK_S, never_given_up
from adapters.outbound import bounded, strict_dumps, strict_json
from domain.errors import QmdError

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
_SECRET_LIKE = re.compile(r"\b(sk|pk|rk|key|tok)[-_][A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)


class HttpStatusError(Exception):
    """A non-2xx answer that was not retried (or whose retries ran out)."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        super().__init__(f"HTTP {status} {reason}")
        self.status = status
        self.reason = reason
        self.body = body


def public_url(url: str) -> str:
    """`url` without user info, query or fragment: safe to print."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP date; None if unusable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class JsonHttpClient:
    """POST/GET JSON against `base_url` (e.g. `http://127.0.0.1:8080/v1`)."""

    base_url: str
    describe: Callable[[str], QmdError]  # reason -> the error to raise
    api_key: str | None = field(default=None, repr=False)
    key_source: str = ""  # where the key came from, for messages (an env var name)
    timeout: float = 60.0
    max_attempts: int = 4
    backoff: float = 0.5
    sleep: Callable[[float], None] = time.sleep
    # raises when the request this call serves is given up: asked before every attempt and
    # during the waits between them, so retries stop too (REQ-SEARCH-CANCEL-MODEL-001); the
    # default never stops
    stop_check: Callable[[], None] = never_given_up
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise self.describe(f"{public_url(self.base_url)!r} is not an http(s) URL")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")

    @property
    def public_base(self) -> str:
        return public_url(self.base_url)

    def root_url(self) -> str:
        """The server root: the base URL without a trailing `/v1`."""
        return re.sub(r"/v1$", "", self.base_url)

    # ------------------------------------------------------------------ requests

    def post(self, path: str, body: Mapping[str, Any], *, retry: bool = True) -> Any:
        return self.request("POST", path, body, retry=retry)

    def get(self, path: str) -> Any:
        return self.request("GET", path, None)

    def request(
        self, method: str, path: str, body: Mapping[str, Any] | None, *, retry: bool = True
    ) -> Any:
        """Decoded JSON of a 2xx answer; raises `HttpStatusError` for other statuses
        (after retries where they apply) and the `describe` error for transport failures."""
        url_path = self._prefix + path if path.startswith("/") else path
        try:
            payload = None if body is None else strict_dumps(body).encode("utf-8")
        except ValueError as exc:  # NaN or Infinity: not JSON, never sent
            raise self.describe(
                f"{method} {self._public(url_path)}: the request holds a non-finite number"
            ) from exc
        headers = {"Accept": "application/json", "User-Agent": "qmd-reference"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        attempt = 0
        while True:
            attempt += 1
            self.stop_check()
            try:
                status, reason, response_headers, raw = self._exchange(
                    method, url_path, payload, headers
                )
            except TimeoutError as exc:
                raise self.describe(
                    f"{method} {self._public(url_path)} got no answer within "
                    f"{self.timeout:g} s (timeout)"
                ) from exc
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                if attempt < self.max_attempts:
                    self._wait(self.backoff * 2 ** (attempt - 1))
                    continue
                raise self.describe(
                    f"{method} {self._public(url_path)} failed after {attempt} attempt(s): "
                    f"{self.redact(_describe_os_error(exc))}"
                ) from exc
            if 200 <= status < 300:
                try:
                    return strict_json(raw)
                except ValueError as exc:
                    raise self.describe(
                        f"{method} {self._public(url_path)} answered with something that "
                        f"is not strict JSON ({exc})"
                    ) from exc
            text = self.redact(raw.decode("utf-8", errors="replace"))
            if retry and status in RETRYABLE_STATUS and attempt < self.max_attempts:
                wait = retry_after_seconds(response_headers.get("retry-after"))
                if wait is None:
                    wait = self.backoff * 2 ** (attempt - 1)
                if wait > self.timeout:
                    raise self.describe(
                        f"{method} {self._public(url_path)}: HTTP {status} {reason}, and the "
                        f"server asks to retry after {wait:g} s, longer than the timeout of "
                        f"{self.timeout:g} s"
                    )
                self._wait(wait)
                continue
            raise HttpStatusError(status, reason, text)

    def _wait(self, seconds: float) -> None:
        """The pause before a retry, in steps of `WAIT_CHECK_S` with the stop check between
        them: a Retry-After may ask for up to `timeout` seconds, which a given-up call must
        not spend holding its model-lane thread."""
        left = seconds
        while left > 0:
            self.stop_check()
            step = min(WAIT_CHECK_S, left)
            self.sleep(step)
            left -= step

    def fail(self, method: str, path: str, error: HttpStatusError) -> QmdError:
        """The `describe` error for an HTTP status answer, with a hint per status."""
        detail = _server_message(error.body)
        hint = ""
        if error.status in (401, 403):
            source = self.key_source or "no API key was configured"
            hint = f" (the server refused the credentials; key from {source})"
        elif error.status in RETRYABLE_STATUS:
            hint = f" (still failing after {self.max_attempts} attempts)"
        message = f"{method} {self._public(self._prefix + path)}: HTTP {error.status} "
        message += f"{error.reason}{hint}"
        if detail:
            message += f": {detail}"
        return self.describe(message)

    def redact(self, text: str) -> str:
        """`text` with the API key (and anything shaped like one) masked."""
        if self.api_key:
            text = text.replace(self.api_key, "***")
        return _SECRET_LIKE.sub(lambda m: m.group(1) + "-***", text)

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    # ------------------------------------------------------------------ plumbing

    def _public(self, path: str) -> str:
        parts = urllib.parse.urlsplit(self.base_url)
        return public_url(urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", "")))

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is not None and connection.sock is None:
            connection = None  # closed under us: open another
        if connection is None:
            factory = (
                http.client.HTTPSConnection
                if self._scheme == "https"
                else http.client.HTTPConnection
            )
            connection = factory(self._host, self._port, timeout=timeout)
            connection.connect()
            # Without this, Nagle's algorithm holds back the request body until the server
            # ACKs the headers, which a delayed ACK postpones: 25-45 ms per request on a
            # kept-alive loopback connection instead of 4 (measured, ADR 0013).
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._local.connection = connection
        return connection

    def _exchange(
        self, method: str, path: str, payload: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, str, Mapping[str, str], bytes]:
        # a stop check that can never stop needs no watching
        stop = None if self.stop_check is never_given_up else self.stop_check
        try:
            with bounded(self.timeout, stop) as exchange:
                connection = self._connection(exchange.left())
                exchange.attach(connection.sock)
                connection.request(method, path, body=payload, headers=dict(headers))
                response = connection.getresponse()
                raw = response.read()
        except BaseException:
            # A half-used connection cannot carry the next request.
            self.close()
            raise
        lowered = {k.lower(): v for k, v in response.getheaders()}
        if response.will_close:
            self.close()
        return response.status, response.reason, lowered, raw


def _describe_os_error(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the server running?)"
    if isinstance(exc, socket.gaierror):
        return f"host name not resolved ({exc})"
    if isinstance(exc, http.client.RemoteDisconnected | ConnectionResetError):
        return "the server closed the connection"
    return f"{exc.__class__.__name__}: {exc}"


def _server_message(body: str) -> str:
    """The server's own error text, from OpenAI-style `{"error": {...}}` or plain text."""
    try:
        data = strict_json(body)
    except ValueError:
        return body.strip()[:300]
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data))
        if isinstance(error, dict):
            error = error.get("message", error)
        return str(error)[:300]
    return str(data)[:300]
