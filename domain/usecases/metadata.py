"""Document metadata: recorded while indexing, resolved into candidate sets for filters, and
read back for results (docs/spec/filters.md, REQ-META-*, REQ-FILTER-*)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from domain.errors import INVALID_ARGUMENT, QmdError
from domain.filters import FilterNode, MetaValue, matches, narrowing, parse_filter
from domain.indexing import SourceFile
from domain.metadata import file_facts, merge
from domain.ports import FrontMatterReader, MetadataIndex

# (collection, relative path) -> extra fields for that document (an extractor's), or None
ExtraMetadata = Callable[[str, str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class MetadataRecorder:
    """What `qmd update` needs to record metadata: where it goes, how front matter is read,
    and optionally where extra fields per document come from (an extractor)."""

    index: MetadataIndex
    front_matter: FrontMatterReader | None = None
    extra: ExtraMetadata | None = None

    def record(
        self,
        collection: str,
        file: SourceFile,
        text: str,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, MetaValue]:
        """Merge the file's facts, its front matter and any extra fields; store and return
        them. `extra` (given by the caller) adds to what the `extra` hook gives."""
        metadata = self.fields(collection, file, text, extra)
        self.index.put_metadata(collection, file.relative_path, metadata)
        return metadata

    def record_many(
        self,
        collection: str,
        entries: Sequence[tuple[SourceFile, str, Mapping[str, Any] | None]],
    ) -> None:
        """`record` of each (file, text, extra), stored together (REQ-INDEX-BATCH-001)."""
        self.index.put_metadata_many(
            collection,
            [
                (file.relative_path, self.fields(collection, file, text, extra))
                for file, text, extra in entries
            ],
        )

    def fields(
        self,
        collection: str,
        file: SourceFile,
        text: str,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, MetaValue]:
        """What `record` stores for the file."""
        fields: dict[str, Any] = {}
        if self.extra is not None:
            fields.update(self.extra(collection, file.relative_path) or {})
        fields.update(extra or {})
        front = self.front_matter.read(text) if self.front_matter is not None else {}
        return merge(file_facts(file.relative_path, file.size, file.modified_at), front, fields)


class MetadataService:
    """Read side: which documents a filter admits, and the metadata of result documents."""

    def __init__(self, index: MetadataIndex) -> None:
        self._index = index
        # result documents' metadata by id: the index's own lookup, with no step in between
        # (a page of results asks it for those whose hits did not carry it, REQ-FILTER-006)
        self.of: Callable[[Sequence[int]], dict[int, dict[str, MetaValue]]] = index.metadata_by_id

    def scope(
        self, node: FilterNode | None, collections: Sequence[str] | None = None
    ) -> frozenset[int] | None:
        """The ids of the active documents (in `collections`) that pass `node`; None when
        there is no filter. Evaluated over every document's metadata, so what a search then
        ranks is already filtered (REQ-FILTER-003). A store with an index of metadata values
        reads only the documents meeting the filter's necessary condition (REQ-FILTER-009)."""
        if node is None:
            return None
        return frozenset(
            doc_id
            for doc_id, metadata in self._index.active_metadata(collections, narrowing(node))
            if matches(node, metadata)
        )

    def scope_json(
        self, raw: object | None, collections: Sequence[str] | None = None
    ) -> frozenset[int] | None:
        """`scope` of a filter given as parsed JSON (None: no filter); a bad filter is
        `invalid-argument` naming what is wrong (REQ-FILTER-001)."""
        if raw is None:
            return None
        return self.scope(parse_filter(raw), collections)


def require(service: MetadataService | None) -> MetadataService:
    """The metadata service, or `invalid-argument` when this index keeps no metadata."""
    if service is None:
        raise QmdError(INVALID_ARGUMENT, "Filters need document metadata, which this index lacks")
    return service
