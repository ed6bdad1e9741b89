"""Index health: counts per collection and embedding backlog.

REQ-TOOL-STATUS-001, REQ-SPEC-STATUS-*.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from domain.extraction import ExtractionReport
from domain.indexing import CollectionStatus, IndexStatus
from domain.ports import DocumentStore, VectorIndex
from domain.usecases.embedding import (
    FingerprintProbes,
    SameModel,
    other_names_of_model,
    same_text,
)

if TYPE_CHECKING:
    from domain.usecases.extraction import DocumentExtraction


@dataclass(frozen=True)
class EmbeddingIdentity:
    """Which vectors count as current: the embed model reference and its fingerprint, and
    what else the fingerprint hashes (None: unknown), for the same model stored under another
    name (REQ-VEC-MODEL-001)."""

    model: str
    fingerprint: str
    probes: FingerprintProbes | None = None

    def also(
        self, stored_models: Iterable[str], same_model: SameModel
    ) -> tuple[tuple[str, str], ...]:
        """The other (name, fingerprint) pairs whose vectors are this model's."""
        return other_names_of_model(self.model, self.probes, stored_models, same_model)


class StatusReader:
    def __init__(
        self,
        store: DocumentStore,
        vectors: VectorIndex,
        identity: Callable[[], EmbeddingIdentity],
        extraction: DocumentExtraction | None = None,
        same_model: SameModel = same_text,
    ) -> None:
        self._extraction = extraction
        self._same_model = same_model
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
        also = identity.also(self._vectors.stored_vector_models(), self._same_model)
        pending = self._vectors.pending_count(identity.model, identity.fingerprint, also=also)
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
