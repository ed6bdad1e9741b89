"""Finding documents by reference and fetching them, singly or by pattern.

docs/spec/retrieval.md: REQ-TOOL-GET-*, REQ-TOOL-MGET-*.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domain.bounds import check_pattern, check_reference
from domain.errors import (
    EXCLUDED,
    INVALID_ARGUMENT,
    NOT_FOUND,
    UNAVAILABLE,
    DocumentNotFoundError,
    QmdError,
)
from domain.globs import glob_match, is_comma_list, split_comma_list
from domain.model import Collection, DocumentMeta
from domain.paths import (
    decode_uri_component,
    normalize_docid,
    parse_line_ref,
    parse_virtual_path,
)
from domain.ports import DocumentStore
from domain.suggest import NameIndex, near_names, tail
from domain.text import js_round, resolve_context

GET_SUGGESTION_DISTANCE = 5
GET_SUGGESTION_LIMIT = 5
LIST_SUGGESTION_LIMIT = 3
# a document rewritten again between each lookup and read this many times is reported busy
FETCH_ATTEMPTS = 3


@dataclass(frozen=True)
class Fetched:
    """A found document with its whole body and its resolved context."""

    meta: DocumentMeta
    body: str
    context: str | None


@dataclass(frozen=True)
class GetRequest:
    """A `get` call after the `:from[:count]` suffix was merged with explicit arguments."""

    target: str
    from_line: int | None
    max_lines: int | None


@dataclass(frozen=True)
class MultiGetEntry:
    meta: DocumentMeta
    fetched: Fetched | None
    skipped_reason: str | None


@dataclass(frozen=True)
class MultiGetResult:
    entries: tuple[MultiGetEntry, ...]
    errors: tuple[str, ...]


def merge_get_arguments(
    reference: str, from_line: int | None, max_lines: int | None, suffix_wins: bool = False
) -> GetRequest:
    """Explicit `fromLine`/`maxLines` win over a `:from[:count]` suffix (the original's rule),
    or with `suffix_wins` the suffix wins (seed 000's rule, REQ-SPEC-GET-007); from is
    clamped >= 1."""
    ref = parse_line_ref(reference)
    if suffix_wins:
        start = ref.from_line if ref.from_line is not None else from_line
        count = ref.line_count if ref.line_count is not None else max_lines
    else:
        start = from_line if from_line is not None else ref.from_line
        count = max_lines if max_lines is not None else ref.line_count
    if start is not None:
        start = max(1, start)
    return GetRequest(ref.target, start, count)


def size_skip_reason(length: int, max_bytes: int) -> str:
    return f"File too large ({js_round(length / 1024)}KB > {js_round(max_bytes / 1024)}KB)"


class Retrieval:
    """Document lookup with the original's resolution order and suggestions."""

    def __init__(self, store: DocumentStore, home: str | None = None) -> None:
        self._store = store
        self._home = home
        # (the pairs they were built from, the names), reused while the paths stay the same
        self._names: tuple[tuple[tuple[str, str], ...], NameIndex] | None = None
        self._qualified: tuple[tuple[tuple[str, str], ...], NameIndex] | None = None
        # (the pairs, the number of segments compared, the paths by their last segments)
        self._tails: tuple[tuple[tuple[str, str], ...], int, NameIndex | None] | None = None

    def _name_index(self, pairs: Sequence[tuple[str, str]], qualified: bool = False) -> NameIndex:
        """Suggestion candidates: collection-relative paths (the original's), or with
        `qualified` `collection/path` (what search results show); rebuilt only when the
        indexed paths changed.

        Equally near paths come in the order the original reads them: its
        `SELECT path FROM documents WHERE active = 1` walks the covering index on
        (path, active), so by path (byte order), then by id; `pairs` come by id."""
        listed = tuple(pairs)
        cached = self._qualified if qualified else self._names
        if cached is not None and cached[0] == listed:
            return cached[1]
        if qualified:
            names = NameIndex(f"{c}/{p}" for c, p in listed)
        else:
            names = NameIndex(sorted((p for _, p in listed), key=_utf8_order))
        if qualified:
            self._qualified = (listed, names)
        else:
            self._names = (listed, names)
        return names

    def _near_names(self, pairs: Sequence[tuple[str, str]], target: str) -> list[str]:
        """REQ-SPEC-GET-NAME-001: the paths near `target` by the whole path or by as many of
        their last segments as `target` has."""
        whole = self._name_index(pairs)
        segments = target.count("/") + 1
        listed = tuple(pairs)
        cached = self._tails
        if cached is not None and cached[0] == listed and cached[1] == segments:
            tails = cached[2]
        else:
            longer = any(path.count("/") + 1 > segments for path in whole.paths)
            tails = (
                NameIndex(whole.paths, (tail(path, segments) for path in whole.paths))
                if longer
                else None  # every path is compared whole already
            )
            self._tails = (listed, segments, tails)
        return near_names(target, whole, tails, GET_SUGGESTION_DISTANCE, GET_SUGGESTION_LIMIT)

    # -- contexts ---------------------------------------------------------------------------

    def context_for(self, meta: DocumentMeta) -> str | None:
        collection = self._store.get_collection(meta.collection)
        contexts = collection.contexts if collection else {}
        return resolve_context(self._store.get_global_context(), contexts, meta.path)

    def fetch(self, meta: DocumentMeta) -> Fetched:
        """The body and context of a document found a moment ago.

        Lookups and reads are separate statements, and a `qmd update` may commit between
        them: when the content `meta` names is gone (the document was edited or removed, and
        its old content deleted), the document's current version is read instead, and a
        document removed meanwhile is not found. Readers never see a torn index.
        """
        for _ in range(FETCH_ATTEMPTS):
            try:
                body = self._store.body(meta.hash)
            except QmdError as error:
                if error.code != NOT_FOUND:
                    raise
                current = self._store.document_by_path(meta.collection, meta.path)
                if current is None:
                    raise DocumentNotFoundError(meta.display_path) from None
                meta = current
                continue
            return Fetched(meta, body, self.context_for(meta))
        raise QmdError(UNAVAILABLE, f"{meta.display_path} kept changing while being read.")

    # -- single document ----------------------------------------------------------------------

    def find(
        self,
        reference: str,
        *,
        original: str | None = None,
        own_suggestions: bool = False,
        encoded_uris: bool = False,
        unicode_forms: bool = False,
    ) -> DocumentMeta:
        """Resolve a path, `qmd://` URI or docid to an active document.

        Raises DocumentNotFoundError (with suggestions for paths) or QmdError(EXCLUDED). With
        `own_suggestions` (this project's surfaces; without it the original's rule), a miss is
        also compared with each path's last segments (REQ-SPEC-GET-NAME-001), and one spelled
        `collection/path` (as search results show paths) that is close to nothing is compared
        with `collection/path` names (REQ-SPEC-GET-006). With `encoded_uris`, a `qmd://` URI
        found by nothing as written is looked up once percent-decoded, as the resource URIs the
        server hands out are written. With `unicode_forms`, a path found by nothing as written
        is looked up in the other Unicode normalisation forms (a name macOS stored decomposed,
        typed composed).
        """
        check_reference(reference)
        shown = original if original is not None else reference
        target = parse_line_ref(reference).target.strip()
        if not target:
            raise QmdError(INVALID_ARGUMENT, "A document reference must not be empty.")
        docid = normalize_docid(target)
        if docid is not None:
            found = self._store.document_by_docid(docid)
            if found is None:
                raise DocumentNotFoundError(shown)
            return found
        if self._home and (target == "~" or target.startswith("~/")):
            target = self._home + target[1:]
        meta = self._lookup_path(target)
        if meta is None and encoded_uris and target.startswith("qmd:") and "%" in target:
            meta = self._lookup_path(decode_uri_component(target))
        if meta is None and unicode_forms and not target.isascii():
            for form in ("NFC", "NFD"):
                spelled = unicodedata.normalize(form, target)
                meta = self._lookup_path(spelled) if spelled != target else None
                if meta is not None:
                    break
        if meta is not None:
            return meta
        self._raise_if_excluded(target, shown)
        pairs = self._store.document_paths()
        if own_suggestions:
            suggestions = self._near_names(pairs, target)
        else:
            suggestions = self._name_index(pairs).similar(
                target, GET_SUGGESTION_DISTANCE, GET_SUGGESTION_LIMIT
            )
        if not suggestions and own_suggestions:
            spelled = target[len("qmd://") :] if target.startswith("qmd://") else target
            suggestions = self._name_index(pairs, qualified=True).similar(
                spelled, GET_SUGGESTION_DISTANCE, GET_SUGGESTION_LIMIT
            )
        raise DocumentNotFoundError(shown, suggestions)

    def _lookup_path(self, target: str) -> DocumentMeta | None:
        virtual = parse_virtual_path(target) if target.startswith("qmd:") else None
        if virtual is not None:
            exact = self._store.document_by_path(virtual.collection, virtual.path)
            if exact is not None:
                return exact
        suffix = self._store.document_by_suffix(target)
        if suffix is not None:
            return suffix
        if virtual is not None:
            return None
        for collection in self._store.list_collections():
            relative = _relative_to(collection, target)
            if relative is not None:
                meta = self._store.document_by_path(collection.name, relative)
                if meta is not None:
                    return meta
            meta = self._store.document_by_path(collection.name, target)
            if meta is not None:
                return meta
        return None

    def _raise_if_excluded(self, target: str, shown: str) -> None:
        for collection in self._store.list_collections():
            if not collection.ignore:
                continue
            candidates = [target]
            relative = _relative_to(collection, target)
            if relative is not None:
                candidates.append(relative)
            if target.startswith(collection.name + "/"):
                candidates.append(target[len(collection.name) + 1 :])
            for candidate in candidates:
                for rule in collection.ignore:
                    if glob_match(rule, candidate):
                        raise QmdError(
                            EXCLUDED,
                            f"Document excluded by ignore rule: {shown}\n"
                            f"Collection: {collection.name}\n"
                            f"Matched path: {candidate}\n"
                            f"Ignore rule: {rule}",
                        )

    # -- many documents -----------------------------------------------------------------------

    def multi_get(self, pattern: str, max_bytes: int) -> MultiGetResult:
        """Resolve a glob, a comma list or docids; skip bodies longer than `max_bytes`."""
        check_pattern(pattern)
        errors: list[str] = []
        metas: list[DocumentMeta] = []
        stripped = pattern.strip()
        if is_comma_list(stripped) or normalize_docid(stripped) is not None:
            all_docs = self._store.documents()
            for name in split_comma_list(stripped):
                try:
                    metas.append(self._resolve_list_item(name, all_docs))
                except QmdError as error:
                    errors.append(error.message)
        else:
            for meta in self._store.documents():
                if any(
                    glob_match(stripped, candidate)
                    for candidate in (meta.virtual_path, meta.path, meta.display_path)
                ):
                    metas.append(meta)
            if not metas:
                errors.append(f"No files matched pattern: {pattern}")
        entries = []
        for meta in metas:
            if meta.body_length > max_bytes:
                entries.append(
                    MultiGetEntry(meta, None, size_skip_reason(meta.body_length, max_bytes))
                )
            else:
                try:
                    fetched = self.fetch(meta)
                except DocumentNotFoundError:
                    continue  # removed by an update since the listing: as if listed after it
                entries.append(MultiGetEntry(fetched.meta, fetched, None))
        return MultiGetResult(tuple(entries), tuple(errors))

    def _resolve_list_item(self, name: str, all_docs: Sequence[DocumentMeta]) -> DocumentMeta:
        docid = normalize_docid(name)
        if docid is not None:
            found = self._store.document_by_docid(docid)
            if found is None:
                raise QmdError("not-found", f"File not found: {name}")
            return found
        lowered = "/" + name.lower()
        tiers: tuple[Callable[[DocumentMeta], bool], ...] = (
            lambda m: m.virtual_path == name,
            lambda m: m.display_path == name,
            lambda m: m.path == name,
            lambda m: m.virtual_path.lower().endswith(lowered),
        )
        for matches in tiers:
            hits = [m for m in all_docs if matches(m)]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                listed = ", ".join(sorted(m.virtual_path for m in hits))
                raise QmdError(INVALID_ARGUMENT, f"Ambiguous path {name}: {listed}")
        pairs = [(m.collection, m.path) for m in all_docs]
        suggestions = self._name_index(pairs).similar(
            name, GET_SUGGESTION_DISTANCE, LIST_SUGGESTION_LIMIT
        )
        hint = f" (did you mean: {', '.join(suggestions)}?)" if suggestions else ""
        raise QmdError("not-found", f"File not found: {name}{hint}")


def _utf8_order(path: str) -> bytes:
    # SQLite's BINARY collation compares UTF-8 bytes (code point order, surrogates aside)
    return path.encode("utf-8", "surrogatepass")


def _relative_to(collection: Collection, target: str) -> str | None:
    root = collection.path.rstrip("/")
    if root and target.startswith(root + "/"):
        return target[len(root) + 1 :]
    return None
