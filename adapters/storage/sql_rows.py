"""Row decoders and SQL fragments both index stores share (`adapters.sqlite`,
`adapters.postgres`): the tables have the same columns on both, so a row reads the same."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from domain.model import DEFAULT_PATTERN, Collection, DocumentMeta
from domain.ports import ChunkRow

# DocumentMeta's columns, in `meta_from_row`'s order, over `META_FROM`
META_COLUMNS = (
    "d.id, d.collection, d.path, d.title, d.hash, d.created_at, d.modified_at, LENGTH(content.doc)"
)
META_FROM = "FROM documents d JOIN content ON content.hash = d.hash"
COLLECTION_COLUMNS = (
    "name, path, pattern, ignore_patterns, include_by_default, update_command, context"
)
ORPHAN_VECTOR_COUNT = (
    "SELECT COUNT(*) FROM content_vectors cv WHERE NOT EXISTS ("
    "SELECT 1 FROM documents d WHERE d.hash = cv.hash AND d.active = 1)"
)
LLM_CACHE_KEEP = 1000
# the largest LIMIT both databases take (a 64-bit integer): SQLite reads a larger one as a
# float and refuses the statement, PostgreSQL refuses the parameter
SQL_MAX_LIMIT = 2**63 - 1


def sql_limit(limit: int) -> int:
    """`limit` as a LIMIT the database takes: a larger one asks for every row anyway."""
    return min(int(limit), SQL_MAX_LIMIT)


def now_iso() -> str:
    """UTC now as the original's `new Date().toISOString()` (milliseconds, `Z`)."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def escape_like(value: str) -> str:
    """Escape `#`, `%` and `_` for `LIKE … ESCAPE '#'` (the original's escapeLikePattern)."""
    return value.replace("#", "##").replace("%", "#%").replace("_", "#_")


def meta_from_row(row: Sequence[Any]) -> DocumentMeta:
    return DocumentMeta(
        id=int(row[0]),
        collection=str(row[1]),
        path=str(row[2]),
        title=str(row[3]),
        hash=str(row[4]),
        created_at=str(row[5]),
        modified_at=str(row[6]),
        body_length=int(row[7] or 0),
    )


def collection_from_row(row: Sequence[Any]) -> Collection:
    """A `store_collections` row (`COLLECTION_COLUMNS`); the lists are JSON text."""
    name, path, pattern, ignore_json, include, update_command, context_json = row
    ignore: tuple[str, ...] = ()
    if ignore_json:
        parsed = json.loads(ignore_json)
        if isinstance(parsed, list):
            ignore = tuple(str(item) for item in parsed)
    contexts: dict[str, str] = {}
    if context_json:
        parsed_ctx = json.loads(context_json)
        if isinstance(parsed_ctx, dict):
            contexts = {str(k): str(v) for k, v in parsed_ctx.items()}
    return Collection(
        name=str(name),
        path=str(path),
        pattern=str(pattern or DEFAULT_PATTERN),
        ignore=ignore,
        include_by_default=include != 0,
        update_command=str(update_command) if update_command else None,
        contexts=contexts,
    )


def collection_params(collection: Collection) -> tuple[Any, ...]:
    """`collection` as a `store_collections` row (`COLLECTION_COLUMNS`'s order)."""
    return (
        collection.name,
        collection.path,
        collection.pattern or DEFAULT_PATTERN,
        json.dumps(list(collection.ignore), ensure_ascii=False) if collection.ignore else None,
        1 if collection.include_by_default else 0,
        collection.update_command or None,
        json.dumps(dict(collection.contexts), ensure_ascii=False, separators=(",", ":"))
        if collection.contexts
        else None,
    )


def chunk_from_row(row: Sequence[Any]) -> ChunkRow:
    """A live chunk row: id, collection, path, seq, heading path, lines, text."""
    return ChunkRow(
        id=int(row[0]),
        collection=str(row[1]),
        path=str(row[2]),
        seq=int(row[3]),
        heading_path=str(row[4]),
        start_line=int(row[5]),
        end_line=int(row[6]),
        text=str(row[7]),
    )
