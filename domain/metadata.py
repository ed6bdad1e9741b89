"""Document metadata: what a filter can ask about (docs/spec/filters.md, REQ-META-*).

Every indexed document gets `format` (its file extension, lower case, without the dot), `size`
(bytes) and `modified` (ISO 8601) from the file itself; front matter adds its scalar and list
fields (`date`, `tags`, `author`, ...), and an extractor may add its own (`title`, `author`,
`created`, `pages`, ...). Values are strings, numbers, booleans or lists of those; anything
else (nested maps, nulls) is left out rather than guessed at. The JSON form metadata is stored
and shown in is domain/model.py's (`metadata_as_json`, `metadata_from_json`).
"""

from __future__ import annotations

import datetime as _dt
import math
import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: the filter code loads with the first filter
    from domain.filters import MetaValue, Scalar

FILE_KEYS = ("format", "size", "modified")
MAX_KEYS = 64  # one document's metadata is bounded (docs/spec/filters.md)
MAX_STRING = 1024
MAX_LIST = 64


def file_facts(relative_path: str, size: int, modified_at: str) -> dict[str, MetaValue]:
    """The metadata every document has: REQ-META-001."""
    extension = posixpath.splitext(relative_path)[1].lstrip(".").lower()
    return {"format": extension, "size": int(size), "modified": modified_at}


def _scalar(value: object) -> Scalar | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, _dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return value[:MAX_STRING]
    return None


def normalize(raw: Mapping[Any, Any]) -> dict[str, MetaValue]:
    """Keep what a filter can compare: string keys with scalar or list-of-scalar values
    (dates become ISO strings); drop the rest (REQ-META-002)."""
    kept: dict[str, MetaValue] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key or len(kept) >= MAX_KEYS:
            continue
        if isinstance(value, list | tuple):
            items = [_scalar(item) for item in value[:MAX_LIST]]
            kept[key] = tuple(item for item in items if item is not None)
            continue
        scalar = _scalar(value)
        if scalar is not None:
            kept[key] = scalar
    return kept


def merge(
    facts: Mapping[str, MetaValue],
    front_matter: Mapping[str, MetaValue] | None = None,
    extra: Mapping[str, MetaValue] | None = None,
) -> dict[str, MetaValue]:
    """One document's metadata: an extractor's fields, overridden by what the author wrote in
    front matter, overridden by the file's own facts (`format`, `size`, `modified`)."""
    merged: dict[str, MetaValue] = {}
    merged.update(normalize(extra or {}))
    merged.update(front_matter or {})
    merged.update(facts)
    return merged
