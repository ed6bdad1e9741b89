"""Chunk rows kept in step with the index (docs/spec/projmem.md, REQ-PROJMEM-CHUNK-*).

`ChunkKeeper.sync` cuts every active document whose rows are missing or were cut from other
content, and drops the rows of documents that are gone. `ChunkedCollections` runs it after
every indexing pass and collection removal, so `qmd update` fills the table for every document
whether or not anything is embedded. An index written by another program (the original QMD,
which knows nothing of the table) is repaired by the next sync; reads never see stale rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.indexing import ScanResult, UpdateCounts
from domain.model import Collection
from domain.ports import (
    ChunkIndex,
    Clock,
    ConfigRepository,
    ContentSource,
    DocumentCut,
    DocumentStore,
)
from domain.sections import split_sections
from domain.usecases.collections import CollectionManager, IndexingParts, ProgressCallback

CUT_BATCH = 500  # documents cut and written per call (bounds the memory of a large update)


class ChunkKeeper:
    def __init__(self, store: DocumentStore, chunks: ChunkIndex) -> None:
        self._store = store
        self._chunks = chunks

    @property
    def store(self) -> DocumentStore:
        return self._store

    def sync(self) -> tuple[int, int]:
        """(documents cut, stale rows dropped)."""
        with self._store.transaction():
            stale = self._chunks.unchunked_documents()
            for start in range(0, len(stale), CUT_BATCH):
                cuts: list[DocumentCut] = []
                for doc_id, content_hash in stale[start : start + CUT_BATCH]:
                    body = self._store.body(content_hash)
                    cuts.append(DocumentCut(doc_id, content_hash, split_sections(body)))
                self._chunks.replace_chunks(cuts)
            dropped = self._chunks.prune()
        return len(stale), dropped


class ChunkedCollections(CollectionManager):
    """The collection manager, with the chunk rows synced after each change to documents."""

    def __init__(
        self,
        keeper: ChunkKeeper,
        config: ConfigRepository,
        source: ContentSource,
        clock: Clock,
        parts: IndexingParts | None = None,
    ) -> None:
        super().__init__(keeper.store, config, source, clock, parts)
        self._keeper = keeper

    @property
    def keeper(self) -> ChunkKeeper:
        return self._keeper

    def index(
        self,
        collection: Collection,
        progress: ProgressCallback | None = None,
        extra_metadata: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        tidy: bool = True,
        scan: ScanResult | None = None,
    ) -> UpdateCounts:
        counts = super().index(collection, progress, extra_metadata, tidy=tidy, scan=scan)
        self._keeper.sync()
        return counts

    def remove(self, name: str) -> int:
        removed = super().remove(name)
        self._keeper.sync()
        return removed


def like_to_regex(pattern: str) -> str:
    """SQL LIKE (`%` any run, `_` one character, case-sensitive here) as a regular expression."""
    out: list[str] = []
    for char in pattern:
        if char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append("\\" + char if not char.isalnum() else char)
    return "".join(out)


def chunk_id_of(reference: str) -> int | None:
    """`#123` or `123` -> 123; anything else is not a chunk reference."""
    text = reference.strip()
    digits = text[1:] if text.startswith("#") else text
    if digits.isascii() and digits.isdigit() and len(digits) <= 18:
        return int(digits)
    return None
