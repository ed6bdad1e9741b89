"""Extraction states for surfaces that report them (the LDIMS resource, docs/spec/ldims.md)."""

from __future__ import annotations

from domain.ports import ExtractionState


class IndexedIsExtracted:
    """The default `ExtractionStates`: knows nothing beyond the index, where every indexed
    document's text is there ("ok") and anything else does not exist. An extraction
    pipeline with per-file records (processing, failed) replaces it."""

    def state_of(self, collection: str, path: str) -> ExtractionState | None:
        return None


OK = ExtractionState("ok")
PROCESSING = "processing"
FAILED = "failed"
