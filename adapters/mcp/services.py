"""What the MCP surfaces need from the application, wired by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from domain.ports import DocumentStore
from domain.usecases.retrieval import Retrieval
from domain.usecases.search import Searcher
from domain.usecases.status import StatusReader


@dataclass(frozen=True)
class Services:
    store: DocumentStore
    searcher: Searcher
    retrieval: Retrieval
    status: StatusReader
