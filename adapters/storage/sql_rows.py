"""The documents' and collections' rows both index stores share (`adapters.sqlite`,
`adapters.postgres`): the tables have the same columns on both, so a row reads the same
(the decoders and SQL fragments), and the DocumentStore and IndexMaintenance methods that are
the same statements on both are written once over them (`Catalog`). Statements use SQLite's
`?` placeholders (PostgreSQL: `pyformat`); each store runs them (`_select`, `_write`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from domain.errors import NOT_FOUND, QmdError
from domain.model import (
    DEFAULT_PATTERN,
    Collection,
    CollectionCatalog,
    DocumentMeta,
    metadata_as_json,
    metadata_from_json,
)
from domain.ports import ChunkRow

if TYPE_CHECKING:
    from domain.filters import MetaValue

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


def metadata_text(metadata: Mapping[str, MetaValue]) -> str:
    """A document's metadata as `py_document_metadata.metadata` holds it: compact JSON."""
    return json.dumps(metadata_as_json(metadata), ensure_ascii=False, separators=(",", ":"))


def metadata_from_text(text: Any) -> dict[str, MetaValue]:
    """A `py_document_metadata.metadata` value read back; {} for text that is not a JSON
    object (nothing we write)."""
    try:
        raw = json.loads(str(text))
    except ValueError:
        return {}
    return metadata_from_json(raw) if isinstance(raw, dict) else {}


_ORPHAN_CONTENT = (
    "SELECT COUNT(*) FROM content WHERE hash NOT IN "
    "(SELECT DISTINCT hash FROM documents WHERE active = 1)"
)


class Catalog:
    """The shared methods over `_select` (rows of a `?` statement) and `_write`."""

    # the column that keeps the order collections were added in
    _INSERTION_ORDER = "rowid"

    def _select(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write(self, statement: str, params: Sequence[Any] = ()) -> None:
        raise NotImplementedError

    def _value(self, statement: str, params: Sequence[Any] = ()) -> Any:
        rows = self._select(statement, params)
        return rows[0][0] if rows else None

    def _count(self, statement: str) -> int:
        return int(self._value(statement) or 0)

    # ------------------------------------------------------------------ collections

    def list_collections(self) -> list[Collection]:
        rows = self._select(
            f"SELECT {COLLECTION_COLUMNS} FROM store_collections ORDER BY {self._INSERTION_ORDER}"
        )
        return [collection_from_row(r) for r in rows]

    def read_catalog(self) -> CollectionCatalog:
        # one statement: the global context rides on every row, and the left join from a
        # one-row table keeps it when there is no collection (the name is then NULL)
        rows = self._select(
            "SELECT (SELECT value FROM store_config WHERE key = 'global_context'), "
            f"{COLLECTION_COLUMNS} FROM (SELECT 1 AS one) AS only_row "
            f"LEFT JOIN store_collections AS c ON 1 = 1 ORDER BY c.{self._INSERTION_ORDER}"
        )
        global_context = rows[0][0] if rows else None
        return CollectionCatalog(
            tuple(collection_from_row(r[1:]) for r in rows if r[1] is not None),
            str(global_context) if global_context else None,
        )

    def get_collection(self, name: str) -> Collection | None:
        rows = self._select(
            f"SELECT {COLLECTION_COLUMNS} FROM store_collections WHERE name = ?", (name,)
        )
        return collection_from_row(rows[0]) if rows else None

    def put_collection(self, collection: Collection) -> None:
        self._write(
            f"INSERT INTO store_collections ({COLLECTION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET path = excluded.path, pattern = excluded.pattern, "
            "ignore_patterns = excluded.ignore_patterns, "
            "include_by_default = excluded.include_by_default, "
            "update_command = excluded.update_command, context = excluded.context",
            collection_params(collection),
        )

    def forget_collection(self, name: str) -> None:
        """Drop only the store_collections row (YAML sync); documents stay."""
        self._write("DELETE FROM store_collections WHERE name = ?", (name,))

    # ------------------------------------------------------------------ settings

    def get_global_context(self) -> str | None:
        value = self._value("SELECT value FROM store_config WHERE key = 'global_context'")
        return str(value) if value else None

    def set_global_context(self, text: str | None) -> None:
        self.set_config_value("global_context", text)

    def get_config_value(self, key: str) -> str | None:
        value = self._value("SELECT value FROM store_config WHERE key = ?", (key,))
        return None if value is None else str(value)

    def set_config_value(self, key: str, value: str | None) -> None:
        if value is None:
            self._write("DELETE FROM store_config WHERE key = ?", (key,))
            return
        self._write(
            "INSERT INTO store_config (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # ------------------------------------------------------------------ lookups

    def _one(self, where: str, params: Sequence[Any]) -> DocumentMeta | None:
        """The first active document (by id) matching `where`."""
        rows = self._select(
            f"SELECT {META_COLUMNS} {META_FROM} WHERE {where} AND d.active = 1 "
            "ORDER BY d.id LIMIT 1",
            tuple(params),
        )
        return meta_from_row(rows[0]) if rows else None

    def document_by_path(self, collection: str, path: str) -> DocumentMeta | None:
        return self._one("d.collection = ? AND d.path = ?", (collection, path))

    def documents(self, collection: str | None = None) -> list[DocumentMeta]:
        if collection is None:
            rows = self._select(
                f"SELECT {META_COLUMNS} {META_FROM} WHERE d.active = 1 ORDER BY d.id"
            )
        else:
            rows = self._select(
                f"SELECT {META_COLUMNS} {META_FROM} WHERE d.active = 1 AND d.collection = ? "
                "ORDER BY d.id",
                (collection,),
            )
        return [meta_from_row(r) for r in rows]

    def document_paths(self) -> list[tuple[str, str]]:
        rows = self._select("SELECT collection, path FROM documents WHERE active = 1 ORDER BY id")
        return [(str(collection), str(path)) for collection, path in rows]

    def body(self, content_hash: str) -> str:
        value = self._value("SELECT doc FROM content WHERE hash = ?", (content_hash,))
        if value is None:
            raise QmdError(NOT_FOUND, f"Content not found: {content_hash}")
        return str(value)

    # ------------------------------------------------------------------ upkeep counts

    def total_documents(self) -> int:
        return self._count("SELECT COUNT(*) FROM documents WHERE active = 1")

    def orphaned_vector_count(self) -> int:
        """Chunk vectors no active document uses any more (`qmd cleanup` removes them)."""
        return self._count(ORPHAN_VECTOR_COUNT)

    def preview_cleanup(self) -> dict[str, int]:
        """What `cleanup` would remove (for `qmd cleanup --dry-run`), same keys."""
        return {
            "cache_entries": self._count("SELECT COUNT(*) FROM llm_cache"),
            "orphaned_vectors": self._count(ORPHAN_VECTOR_COUNT),
            "inactive_documents": self._count("SELECT COUNT(*) FROM documents WHERE active = 0"),
            "orphaned_content": self._count(_ORPHAN_CONTENT),
        }
