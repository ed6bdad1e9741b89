"""The application facade: what driving adapters (MCP surfaces, HTTP) need from the use cases.

The composition root builds it; entry points hand it to a surface, never the whole `App`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from domain.ports import DocumentStore
from domain.usecases.extraction import DocumentExtraction
from domain.usecases.metadata import MetadataService
from domain.usecases.retrieval import Retrieval
from domain.usecases.search import Searcher
from domain.usecases.status import StatusReader

if TYPE_CHECKING:  # built on first use: a command that needs neither never imports them
    from domain.usecases.projmem import ChunkSearch
    from domain.usecases.sessions import SessionMemory


@dataclass(frozen=True)
class Services:
    store: DocumentStore
    searcher: Searcher
    retrieval: Retrieval
    status: StatusReader
    # per-document extraction state and metadata (REQ-EXTRACT-009); None when not wired
    extraction: DocumentExtraction | None = None
    # document metadata for filters and results; None when the index keeps none
    metadata: MetadataService | None = None
    # the projmem surface (chunk rows and session memory); None where not wired
    chunks: ChunkSearch | None = None
    sessions: SessionMemory | None = None
