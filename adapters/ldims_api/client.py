"""The LDIMS backend over HTTP (seed 003 §6, §7): the `DocumentBackend` the LDIMS MCP
service uses when `LDIMS_API_BASE_URL` names one (docs/spec/ldims.md REQ-LDIMS-DEPLOY-002).

    GET {base}/documents?query=…&maxResults=…&searchMode=…   the search
    GET {base}/document-files/{file_id}/content               one file's extracted content

On the standard library, like the model client (ADR 0013); no credentials (the seed's
backend needs none) and no proxy (the seed reaches the backend by IP and port).

One deadline bounds each exchange, connect and send and every read together: the service's
request timeout, or less when the request it serves must be answered sooner, and an exchange
whose request is given up is abandoned within 50 ms (adapters/outbound.py,
REQ-LDIMS-DEPLOY-006): a backend that drips its answer cannot keep a worker. A redirect is
followed only within the backend's own origin, the answer is read as strict JSON (no `NaN`,
no nesting past 64), and every failure is one of the seed's codes (REQ-LDIMS-DEPLOY-003,
REQ-LDIMS-DEPLOY-007): a timeout is `SEARCH_TIMEOUT`; a backend that cannot be reached, does
not speak HTTP, redirects elsewhere, answers 5xx, an unknown status or JSON that is not the
seed's shape is `BACKEND_API_ERROR`, with the status and the backend's own message
(shortened) but never the URL, which stays in the service's log.
"""

from __future__ import annotations

import http.client
import logging
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from adapters.outbound import bounded, origin, strict_json
from domain.document_backend import (
    BACKEND_API_ERROR,
    FILTER_NAMES,
    SEARCH_ERROR_CODES,
    SEARCH_TIMEOUT,
    BackendError,
    BackendSearch,
    DocumentFile,
)
from domain.errors import INVALID_ARGUMENT, QmdError

log = logging.getLogger("qmd.ldims")
MESSAGE_CHARS = 200
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # a document's text; more is not a sane answer
MAX_REDIRECTS = 3  # within the backend's origin
REDIRECTS = frozenset({301, 302, 303, 307, 308})
# what an exchange leaves of its request's time for writing the answer, so the answer is the
# seed's (SEARCH_TIMEOUT) and not the transport's -32001
ANSWER_MARGIN_S = 0.25
UNREACHABLE = "the LDIMS backend cannot be reached"
NOT_HTTP = "the LDIMS backend's answer is not HTTP"


def _no_limit() -> float | None:
    return None


def base_url(raw: str) -> str:
    """`LDIMS_API_BASE_URL` checked: an http(s) URL with a host; `invalid-argument` else."""
    text = raw.strip().rstrip("/")
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise QmdError(
            INVALID_ARGUMENT,
            f"LDIMS_API_BASE_URL must be an http:// or https:// URL, got {raw!r}",
        )
    if parts.query or parts.fragment:
        raise QmdError(INVALID_ARGUMENT, "LDIMS_API_BASE_URL takes no query or fragment")
    return text


class HttpDocumentBackend:
    def __init__(
        self,
        base: str,
        timeout_s: float,
        *,
        time_left: Callable[[], float | None] = _no_limit,
        stop_check: Callable[[], None] | None = None,
    ) -> None:
        """`timeout_s`: the longest one exchange may take; `time_left`: what is left of the
        request being served (None: no limit), which may end an exchange sooner;
        `stop_check`: raises once that request is given up (the composition root hands in
        the request's; None: never)."""
        self.base = base_url(base)
        self.timeout_s = timeout_s
        self._time_left = time_left
        self._stop_check = stop_check

    def search(self, request: BackendSearch) -> Mapping[str, Any]:
        params = {"query": request.query, "maxResults": str(request.max_results)}
        params.update({k: v for k, v in request.filters.items() if k in FILTER_NAMES and v})
        status, body = self._get("/documents?" + urllib.parse.urlencode(params))
        if status != 200:
            raise _failure(status, body)
        if not (
            isinstance(body, dict)
            and isinstance(body.get("results"), list)
            and all(isinstance(item, dict) for item in body["results"])
            and isinstance(body.get("totalMatches"), int)
        ):
            raise _malformed(status)
        return body

    def document_file(self, file_id: str) -> DocumentFile:
        quoted = urllib.parse.quote(file_id, safe="")
        status, body = self._get(f"/document-files/{quoted}/content")
        fields = body if isinstance(body, dict) else {}
        if status == 200:
            content = fields.get("extractedContent")
            if not isinstance(content, str):
                raise _malformed(status)
            return DocumentFile(
                file_id,
                "completed",
                name=_text(fields.get("documentName") or fields.get("fileName")),
                extracted_content=content,
                extracted_at=_text(fields.get("extractedAt")),
                format=_text(fields.get("format")),
            )
        if status == 202:
            return DocumentFile(file_id, "processing")
        if status == 404:
            return DocumentFile(file_id, "not_found")
        if status == 403:
            return DocumentFile(file_id, "forbidden")
        if status == 409:
            details = fields.get("errorDetails")
            return DocumentFile(
                file_id, "failed", details=details if isinstance(details, dict) else {}
            )
        raise _failure(status, body)

    def _get(self, path: str) -> tuple[int, Any]:
        """(status, the answer's JSON or None); BackendError when no answer came."""
        url = self.base + path
        seconds = self.timeout_s
        left = self._time_left()
        if left is not None:
            seconds = min(seconds, max(0.0, left - ANSWER_MARGIN_S))
        try:
            with bounded(seconds, self._stop_check) as exchange:
                for _hop in range(MAX_REDIRECTS + 1):
                    status, location, raw = _exchange(url, exchange.left(), exchange.attach)
                    if status not in REDIRECTS or location is None:
                        return status, _json(raw)
                    target = urllib.parse.urljoin(url, location)
                    if origin(target) != origin(self.base):
                        log.warning("LDIMS backend %s redirected to %s: refused", url, target)
                        raise BackendError(
                            BACKEND_API_ERROR,
                            {
                                "backend_status": status,
                                "message": "the backend redirected to another origin",
                            },
                        )
                    url = target
                raise BackendError(
                    BACKEND_API_ERROR,
                    {"backend_status": status, "message": "the backend redirected too often"},
                )
        except BackendError:
            raise
        except TimeoutError as error:  # the deadline, or a socket timeout on the way
            log.warning("LDIMS backend %s: no answer in %g s (%s)", url, seconds, error)
            raise BackendError(SEARCH_TIMEOUT, {"timeoutSeconds": self.timeout_s}) from None
        except http.client.RemoteDisconnected:
            log.warning("LDIMS backend %s closed the connection without answering", url)
            raise BackendError(BACKEND_API_ERROR, {"reason": UNREACHABLE}) from None
        except http.client.HTTPException as error:
            log.warning("LDIMS backend %s: not an HTTP answer (%r)", url, error)
            raise BackendError(BACKEND_API_ERROR, {"reason": NOT_HTTP}) from None
        except (OSError, ValueError) as error:
            log.warning("LDIMS backend %s unreachable: %s", url, error)
            raise BackendError(BACKEND_API_ERROR, {"reason": UNREACHABLE}) from None
        except Exception as error:  # the request was given up (the stop check's error)
            log.info("LDIMS backend %s: exchange abandoned (%s)", url, error)
            raise BackendError(SEARCH_TIMEOUT, {"timeoutSeconds": self.timeout_s}) from None


def _exchange(
    url: str, seconds: float, attach: Callable[[Any], None]
) -> tuple[int, str | None, bytes]:
    """One GET: (status, Location, body). `attach` receives the connected socket, so that
    the deadline can shut it down whatever the backend does."""
    parts = urllib.parse.urlsplit(url)
    factory = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    # no proxy: the backend is a peer on the service's network
    connection = factory(parts.hostname or "", parts.port, timeout=seconds)
    try:
        connection.connect()
        attach(connection.sock)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection.request("GET", target, headers={"Accept": "application/json"})
        response = connection.getresponse()
        raw = response.read(MAX_ANSWER_BYTES + 1)
        return response.status, response.getheader("Location"), raw
    finally:
        connection.close()


def _json(raw: bytes) -> Any:
    """The answer's JSON, None when it is too long or not strict JSON (a non-finite number,
    nesting past 64 levels: REQ-LDIMS-DEPLOY-007)."""
    if len(raw) > MAX_ANSWER_BYTES:
        return None
    try:
        return strict_json(raw)
    except ValueError:
        return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _malformed(status: int) -> BackendError:
    return BackendError(
        BACKEND_API_ERROR,
        {"backend_status": status, "message": "the backend's answer is not the expected JSON"},
    )


def _failure(status: int, body: Any) -> BackendError:
    """A refusal in the seed's terms is passed on (INVALID_INPUT, QUERY_UNPROCESSABLE,
    FORBIDDEN, SEARCH_TIMEOUT with their details); anything else is BACKEND_API_ERROR with
    the status and the backend's message (seed 003 §4.2)."""
    fields = body if isinstance(body, dict) else {}
    code = fields.get("errorCode")
    details = fields.get("errorDetails")
    if isinstance(code, str) and code in SEARCH_ERROR_CODES and code != BACKEND_API_ERROR:
        return BackendError(code, details if isinstance(details, dict) else None)
    found: dict[str, Any] = {"backend_status": status}
    message = fields.get("errorMessage") or fields.get("error")
    if isinstance(message, str) and message:
        found["message"] = message[:MESSAGE_CHARS]
    return BackendError(BACKEND_API_ERROR, found)
