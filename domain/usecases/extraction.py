"""Extraction during `qmd update`, cached by source content hash, and the per-document state
read API (REQ-EXTRACT-004..REQ-EXTRACT-008, docs/spec/extraction.md).

`DocumentExtraction.obtain` is called by the indexing use case for every file whose format is
extracted (domain.extraction.EXTRACTED_FORMATS). It hashes the file's bytes, and only when no
outcome is cached for that hash does it run the extractor (a worker process in production). A
failure is remembered as well, so a corrupt or hanging file costs its time once, not on every
update; a file that could not be read at all (denied, gone) is retried next time.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from domain.errors import QmdError
from domain.extraction import (
    EMPTY,
    NO_TEXT_LAYER,
    UNREADABLE,
    CachedExtraction,
    ExtractionFailure,
    ExtractionReport,
    ExtractionState,
    MetadataValue,
    file_format,
    is_extracted,
    skipped_detail,
)
from domain.indexing import SourceFile
from domain.ports import Clock, DocumentExtractor, DocumentStore, ExtractionLedger
from domain.text import content_hash, extract_title


@dataclass(frozen=True)
class Obtained:
    """The outcome for one file: its text (None when it failed) and its state to record."""

    state: ExtractionState
    text: str | None = None
    title: str = ""
    metadata: dict[str, MetadataValue] | None = None


def _title(text: str, metadata: dict[str, MetadataValue], path: str) -> str:
    given = metadata.get("title")
    if isinstance(given, str) and given.strip():
        return given.strip()
    # The file name without its extension, as the original titles files with no heading.
    return extract_title(text, posixpath.basename(path))


class DocumentExtraction:
    """Runs extraction with its cache and keeps per-document states."""

    def __init__(
        self,
        extractor: DocumentExtractor,
        ledger: ExtractionLedger,
        store: DocumentStore,
        clock: Clock,
    ) -> None:
        self._extractor = extractor
        self._ledger = ledger
        self._store = store
        self._clock = clock

    @property
    def reader_version(self) -> str:
        """The extractor's version: text recorded under another one is extracted again."""
        return self._extractor.version

    # -- during an update ---------------------------------------------------------------------

    def obtain(self, collection: str, file: SourceFile) -> Obtained:
        digest = self._extractor.digest(file.absolute_path)
        if isinstance(digest, ExtractionFailure):
            return self._failed(collection, file, digest, "")
        cached = self._ledger.cached_extraction(digest.sha256)
        if cached is not None:
            reused = self._from_cache(collection, file, cached)
            if reused is not None:
                return reused
        outcome = self._extractor.extract(file.absolute_path, file_format(file.relative_path))
        if isinstance(outcome, ExtractionFailure):
            if outcome.reason != UNREADABLE:
                self._ledger.remember_extraction(
                    CachedExtraction(
                        source_hash=digest.sha256,
                        status="failed",
                        reason=outcome.reason,
                        detail=outcome.detail,
                        empty_pages=outcome.empty_pages,
                    )
                )
            return self._failed(collection, file, outcome, digest.sha256)
        if not outcome.text.strip():
            reason = NO_TEXT_LAYER if outcome.empty_pages else EMPTY
            failure = ExtractionFailure(
                reason,
                "no page has a text layer (a scanned document?)"
                if outcome.empty_pages
                else "no text found in the document",
                outcome.empty_pages,
            )
            self._ledger.remember_extraction(
                CachedExtraction(
                    digest.sha256, "failed", reason=reason, detail=failure.detail,
                    empty_pages=outcome.empty_pages, pages=outcome.pages,
                )
            )  # fmt: skip
            return self._failed(collection, file, failure, digest.sha256)
        metadata = dict(outcome.metadata)
        title = _title(outcome.text, metadata, file.relative_path)
        cached = CachedExtraction(
            source_hash=digest.sha256,
            status="ok",
            text_hash=content_hash(outcome.text),
            title=title,
            metadata=metadata,
            pages=outcome.pages,
            empty_pages=outcome.empty_pages,
            detail=skipped_detail(metadata),
        )
        self._ledger.remember_extraction(cached)
        return Obtained(self._state(collection, file, cached), outcome.text, title, metadata)

    def _from_cache(
        self, collection: str, file: SourceFile, cached: CachedExtraction
    ) -> Obtained | None:
        if cached.status == "failed":
            failure = ExtractionFailure(cached.reason, cached.detail, cached.empty_pages)
            return self._failed(collection, file, failure, cached.source_hash)
        try:
            text = self._store.body(cached.text_hash)
        except QmdError:
            return None  # the text left the index (its documents were removed): extract again
        state = self._state(collection, file, cached)
        return Obtained(state, text, cached.title, dict(cached.metadata))

    def _failed(
        self, collection: str, file: SourceFile, failure: ExtractionFailure, source_hash: str
    ) -> Obtained:
        state = ExtractionState(
            collection=collection,
            path=file.relative_path,
            status="failed",
            reason=failure.reason,
            detail=failure.detail,
            source_hash=source_hash,
            empty_pages=failure.empty_pages,
            extracted_at=self._clock.now_iso(),
        )
        return Obtained(state)

    def _state(
        self, collection: str, file: SourceFile, outcome: CachedExtraction
    ) -> ExtractionState:
        """The state of a file extracted now or before: an extracted document's `detail` says
        what its text leaves out (REQ-EXTRACT-014)."""
        return ExtractionState(
            collection=collection,
            path=file.relative_path,
            status="ok",
            detail=outcome.detail,
            source_hash=outcome.source_hash,
            empty_pages=outcome.empty_pages,
            pages=outcome.pages,
            extracted_at=self._clock.now_iso(),
        )

    def record(self, collection: str, states: list[ExtractionState]) -> None:
        self._ledger.record_states(collection, states)

    # -- readers (status, and the LDIMS resource's still-processing / failed answers) ----------

    def state_of(self, collection: str, path: str) -> ExtractionState:
        """The extraction state of one document: 'ok', 'failed' (with its reason) or
        'pending' (no outcome recorded yet: found by a scan still running, or never updated).
        A markdown or other text file needs no extraction: always 'ok'. The caller checks
        that the document exists (this answers for any path)."""
        state = self._seen(collection, path)
        if state is not None:
            return state
        return ExtractionState(collection, path, "pending" if is_extracted(path) else "ok")

    def recorded_state(self, collection: str, path: str) -> ExtractionState | None:
        """What the last update recorded for this document, None when nothing was (a text
        file, or a path no update has seen): unlike `state_of`, never a guess."""
        return self._seen(collection, path)

    def _seen(self, collection: str, path: str) -> ExtractionState | None:
        """The recorded state, only for a collection the store shows: under `--force-root`
        an outside document's failed extraction answers as missing, like the document
        itself (REQ-SEC-SCOPE-001)."""
        if self._store.get_collection(collection) is None:
            return None
        return self._ledger.extraction_state(collection, path)

    def metadata_of(self, collection: str, path: str) -> dict[str, MetadataValue]:
        """The metadata the extractor found for a document (title, author, created, pages…)."""
        state = self._seen(collection, path)
        if state is None or not state.source_hash:
            return {}
        cached = self._ledger.cached_extraction(state.source_hash)
        return dict(cached.metadata) if cached is not None else {}

    def report(self, collections: set[str] | None = None) -> ExtractionReport:
        shown = {c.name for c in self._store.list_collections()}
        states = [
            s
            for s in self._ledger.extraction_states()
            if s.collection in shown and (collections is None or s.collection in collections)
        ]
        return ExtractionReport(
            failed=tuple(s for s in states if s.status == "failed"),
            scanned=tuple(s for s in states if s.status == "ok" and s.empty_pages),
            partial=tuple(s for s in states if s.status == "ok" and s.detail),
        )
