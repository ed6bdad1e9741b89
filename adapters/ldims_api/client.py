"""The LDIMS backend over HTTP (seed 003 §6, §7): the `DocumentBackend` the LDIMS MCP
service uses when `LDIMS_API_BASE_URL` names one (docs/spec/ldims.md REQ-LDIMS-DEPLOY-002).

    GET {base}/documents?query=…&maxResults=…&searchMode=…   the search
    GET {base}/document-files/{file_id}/content               one file's extracted content

On the standard library, like the model client (ADR 0013); no credentials (the seed's
backend needs none) and no proxy (the seed reaches the backend by IP and port). Each request
is bounded by the service's request timeout. Failures are the seed's codes: a timeout is
`SEARCH_TIMEOUT`; a backend that cannot be reached, answers 5xx, an unknown status or JSON
that is not the seed's shape is `BACKEND_API_ERROR`, with the status and the backend's own
message (shortened) but never the URL, which stays in the service's log.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

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
    def __init__(self, base: str, timeout_s: float) -> None:
        self.base = base_url(base)
        self.timeout_s = timeout_s
        # no proxy from the environment: the backend is a peer on the service's network
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

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
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                return response.status, _json(response.read(MAX_ANSWER_BYTES + 1))
        except urllib.error.HTTPError as answer:
            with answer:
                return answer.code, _json(answer.read(MAX_ANSWER_BYTES + 1))
        except TimeoutError as error:
            log.warning("LDIMS backend %s: no answer in %g s (%s)", url, self.timeout_s, error)
            raise BackendError(SEARCH_TIMEOUT, {"timeoutSeconds": self.timeout_s}) from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):
                log.warning("LDIMS backend %s: no answer in %g s", url, self.timeout_s)
                raise BackendError(SEARCH_TIMEOUT, {"timeoutSeconds": self.timeout_s}) from None
            log.warning("LDIMS backend %s unreachable: %s", url, reason)
            raise BackendError(
                BACKEND_API_ERROR, {"reason": "the LDIMS backend cannot be reached"}
            ) from None


def _json(raw: bytes) -> Any:
    if len(raw) > MAX_ANSWER_BYTES:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
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
