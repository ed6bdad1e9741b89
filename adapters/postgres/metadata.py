"""Front-matter metadata per document on PostgreSQL (the MetadataIndex port): JSON text, probed
through the GIN index of migration 8."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.postgres.connection import PgConnections
from adapters.storage.sql_rows import metadata_from_text, metadata_text
from domain.filters import AllOf, HasKey, HasValue, MetaValue, Probe
from domain.model import metadata_from_json


def _probe_sql(probe: Probe, params: list[Any]) -> str:
    """`probe` as a condition on the metadata row `m` that its GIN index answers: `@>` holds
    a scalar inside a list only at the top level, so a value is looked for both ways."""
    if isinstance(probe, HasValue):
        params += [
            json.dumps({probe.key: probe.value}),
            json.dumps({probe.key: [probe.value]}),
        ]
        return (
            "(qmd_metadata_jsonb(m.metadata) @> %s::jsonb"
            " OR qmd_metadata_jsonb(m.metadata) @> %s::jsonb)"
        )
    if isinstance(probe, HasKey):
        params.append(probe.key)
        return "qmd_metadata_jsonb(m.metadata) ? %s"
    if not probe.probes:
        return "TRUE" if isinstance(probe, AllOf) else "FALSE"
    joiner = " AND " if isinstance(probe, AllOf) else " OR "
    return "(" + joiner.join(_probe_sql(part, params) for part in probe.probes) + ")"


class PgMetadata(PgConnections):
    """MetadataIndex over the pool."""

    def put_metadata(self, collection: str, path: str, metadata: Mapping[str, MetaValue]) -> None:
        """Replace the metadata of the active document at (collection, path), if any; an
        unchanged value is not rewritten (no dead tuple per unchanged document on update)."""
        encoded = metadata_text(metadata)
        self._execute(
            "INSERT INTO py_document_metadata (doc_id, metadata) SELECT d.id, %s "
            "FROM documents d WHERE d.collection = %s AND d.path = %s AND d.active = 1 "
            "ON CONFLICT (doc_id) DO UPDATE SET metadata = excluded.metadata "
            "WHERE py_document_metadata.metadata IS DISTINCT FROM excluded.metadata",
            (encoded, collection, path),
        )

    def put_metadata_many(
        self, collection: str, entries: Sequence[tuple[str, Mapping[str, MetaValue]]]
    ) -> None:
        """One statement for the lot (a batch of `upsert_documents`, REQ-INDEX-BATCH-001);
        a path given twice keeps its last metadata, as `put_metadata` in turn would."""
        last = {path: metadata_text(metadata) for path, metadata in entries}
        if not last:
            return
        self._execute(
            "INSERT INTO py_document_metadata (doc_id, metadata) SELECT d.id, m.metadata "
            "FROM unnest(%s::text[], %s::text[]) AS m(path, metadata) "
            "JOIN documents d ON d.collection = %s AND d.path = m.path AND d.active = 1 "
            "ORDER BY d.id "
            "ON CONFLICT (doc_id) DO UPDATE SET metadata = excluded.metadata "
            "WHERE py_document_metadata.metadata IS DISTINCT FROM excluded.metadata",
            (list(last), list(last.values()), collection),
        )

    def active_metadata(
        self, collections: Sequence[str] | None, narrowing: Probe | None = None
    ) -> list[tuple[int, dict[str, MetaValue]]]:
        """Every active document's metadata (with `narrowing`, those meeting it, found through
        the GIN index of migration 8), as ONE JSON array built by the server and decoded by
        one `json.loads`."""
        statement = (
            "SELECT COALESCE('[' || string_agg('[' || d.id || ',' || "
            "COALESCE(m.metadata, '{}') || ']', ',' ORDER BY d.id) || ']', '[]') "
            "FROM documents d LEFT JOIN py_document_metadata m ON m.doc_id = d.id "
            "WHERE d.active = 1"
        )
        params: list[Any] = []
        if collections is not None:
            statement += " AND d.collection = ANY(%s)"
            params.append(list(collections))
        if narrowing is not None:
            statement += f" AND {_probe_sql(narrowing, params)}"
        rows = json.loads(str(self._scalar(statement, params) or "[]"))
        return [
            (int(i), metadata_from_json(raw) if isinstance(raw, dict) else {}) for i, raw in rows
        ]

    def metadata_by_id(self, ids: Sequence[int]) -> dict[int, dict[str, MetaValue]]:
        rows = self._query(
            "SELECT doc_id, metadata FROM py_document_metadata WHERE doc_id = ANY(%s)",
            (sorted({int(i) for i in ids}),),
        )
        return {int(doc_id): metadata_from_text(text) for doc_id, text in rows}
