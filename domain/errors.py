"""Stable error codes and the error envelope of seed 001.

Every failure the domain reports is a `QmdError` carrying one of the codes below. Adapters turn
it into an `isError` tool result, a resource envelope, a CLI message or an HTTP status; the code
never changes with the wording, so clients and tests can match on it.
"""

from __future__ import annotations

from typing import Any, Final

INVALID_ARGUMENT: Final = "invalid-argument"
NOT_FOUND: Final = "not-found"
OUT_OF_ROOT: Final = "out-of-root"
EXCLUDED: Final = "excluded-by-ignore"
CONFLICT: Final = "conflict"
UNAVAILABLE: Final = "unavailable"
MODEL_UNAVAILABLE: Final = "model-unavailable"
INTERNAL_ERROR: Final = "internal-error"

ERROR_CODES: Final = frozenset(
    {
        INVALID_ARGUMENT,
        NOT_FOUND,
        OUT_OF_ROOT,
        EXCLUDED,
        CONFLICT,
        UNAVAILABLE,
        MODEL_UNAVAILABLE,
        INTERNAL_ERROR,
    }
)


class QmdError(Exception):
    """A failure with a stable, content-free code and a human message. `brief`: the cause in a
    few words, with no path, URL or library error, for where the failure is a note beside an
    answer rather than the answer (a search stage skipped for want of its model)."""

    def __init__(self, code: str, message: str, *, brief: str = "") -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.brief = brief


def error_envelope(code: str, message: str) -> dict[str, Any]:
    """The one shape every failure shares: `{"success": false, "error": {code, message}}`."""
    return {"success": False, "error": {"code": code, "message": message}}


def envelope_for(error: QmdError) -> dict[str, Any]:
    return error_envelope(error.code, error.message)


class DocumentNotFoundError(QmdError):
    """A lookup that missed; `suggestions` are collection-relative paths that are close."""

    def __init__(self, reference: str, suggestions: list[str] | None = None) -> None:
        super().__init__(NOT_FOUND, f"Document not found: {reference}")
        self.reference = reference
        self.suggestions = list(suggestions or [])
