"""Index health: counts per collection and embedding backlog.

REQ-TOOL-STATUS-001, REQ-SPEC-STATUS-*.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from domain.extraction import ExtractionReport
from domain.indexing import CollectionStatus, IndexStatus
from domain.ports import DocumentStore, VectorIndex

if TYPE_CHECKING:
    from domain.usecases.extraction import DocumentExtraction


@dataclass(frozen=True)
class EmbeddingIdentity:
    """Which vectors count as current: the embed model reference and its fingerprint."""

    model: str
    fingerprint: str


class StatusReader:
    def __init__(
        self,
        store: DocumentStore,
        vectors: VectorIndex,
        identity: Callable[[], EmbeddingIdentity],
        extraction: DocumentExtraction | None = None,
    ) -> None:
        self._extraction = extraction
        self._store = store
        self._vectors = vectors
        # asked for only when a status is read: a command that reports none never works out
        # the embedding model's fingerprint
        self._identity = identity

    def status(self) -> IndexStatus:
        """Collections with at least one active document, most recently updated first."""
        configured = {c.name: c for c in self._store.list_collections()}
        counts = sorted(
            self._store.collection_counts(), key=lambda c: c.last_modified, reverse=True
        )
        collections = tuple(
            CollectionStatus(
                name=count.name,
                path=configured[count.name].path if count.name in configured else None,
                pattern=configured[count.name].pattern if count.name in configured else None,
                documents=count.documents,
                last_updated=count.last_modified,
            )
            for count in counts
        )
        identity = self._identity()
        pending = self._vectors.pending_count(identity.model, identity.fingerprint)
        return IndexStatus(
            total_documents=sum(c.documents for c in counts),
            needs_embedding=pending,
            has_vector_index=self._vectors.has_vector_index(),
            collections=collections,
            # REQ-EXTRACT-005: failures of configured collections, never dropped silently
            extraction=self._extraction.report(set(configured))
            if self._extraction is not None
            else ExtractionReport(),
        )
