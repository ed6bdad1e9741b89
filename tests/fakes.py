"""In-memory fakes of the ports, held to the same contract tests as the real adapters.

* `InMemoryStore`: DocumentStore + LexicalIndex + VectorIndex + LlmCache (+ the config-mirror
  methods `sync_config_to_store` uses). Lexical search is a small Python BM25 over the same three
  weighted columns (filepath 1.5, title 4.0, body 1.0) with FTS5's matching rules (prefix terms,
  phrases within one column, AND / NOT, CJK characters as single tokens); there is no Porter
  stemming, so tests that must pass on both avoid stemmed forms.
* `FakeContentSource`: a dict of files under one folder.
* `FixedClock`: a settable `now_iso`.
* `InMemoryConfigRepository`: ConfigRepository over a dict.
* `FakeExtractor` / `InMemoryExtractionLedger`: DocumentExtractor over a dict of "files" that
  counts its calls, and ExtractionLedger over dicts.

The storage fakes are also one backend, `memory:NAME` (tests/memory_backend/backend.py): the
contract tests open them through `open_backend`, as they open SQLite and PostgreSQL.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections.abc import Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from domain.errors import CONFLICT, INVALID_ARGUMENT, NOT_FOUND, QmdError
from domain.extraction import (
    CachedExtraction,
    Extracted,
    ExtractionFailure,
    ExtractionState,
    MetadataValue,
    SourceDigest,
)
from domain.filters import MetaValue, Probe
from domain.indexing import FileStamp, ScanResult, SkippedFile, SourceFile, Unreadable
from domain.lexfill import FilledHits, filled_by_two_searches
from domain.lexquery import LexClause, LexQuery, LexTerm, space_cjk
from domain.memory import MemoryRecord, Topic, parse_record, record_path, render_record
from domain.model import Collection, CollectionCatalog, Document, DocumentMeta, LexHit, VectorHit
from domain.paths import scan_order_key
from domain.ports import ChunkRow, CollectionCount, DocumentCut, DocumentWrite, UpsertOutcome
from domain.sections import Section
from domain.sessions import SessionRef, Transcript, TurnWindow
from domain.stamps import RecordedStamp

DIMENSION_MISMATCH = (
    "Embedding dimension mismatch: existing vectors are {existing}d but the current model "
    "produces {current}d. Run 'qmd embed -f' to re-embed with the new model."
)
_WEIGHTS = (1.5, 4.0, 1.0)
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def _ascii_lower(text: str) -> str:
    """SQLite LIKE folds ASCII letters only."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(space_cjk(text))]


@dataclass
class _Row:
    id: int
    collection: str
    path: str
    title: str
    hash: str
    created_at: str
    modified_at: str
    active: bool = True


@dataclass(frozen=True)
class _Vector:
    hash: str
    seq: int
    pos: int
    model: str
    fingerprint: str
    total: int
    embedding: tuple[float, ...]


class InMemoryStore:
    def __init__(self) -> None:
        self._collections: dict[str, Collection] = {}
        self._config: dict[str, str] = {}
        self._content: dict[str, str] = {}
        self._rows: dict[int, _Row] = {}
        self._next_id = 1
        self._vectors: dict[tuple[str, int], _Vector] = {}
        self._dims: int | None = None
        self._cache: dict[str, str] = {}
        self._metadata: dict[int, dict[str, MetaValue]] = {}

    @contextmanager
    def transaction(self) -> Iterator[None]:
        yield

    # ------------------------------------------------------------------ collections

    def list_collections(self) -> list[Collection]:
        return list(self._collections.values())

    def read_catalog(self) -> CollectionCatalog:
        return CollectionCatalog(tuple(self.list_collections()), self.get_global_context())

    def get_collection(self, name: str) -> Collection | None:
        return self._collections.get(name)

    def put_collection(self, collection: Collection) -> None:
        self._collections[collection.name] = collection

    def forget_collection(self, name: str) -> None:
        self._collections.pop(name, None)

    def delete_collection(self, name: str) -> int:
        doomed = [r.id for r in self._rows.values() if r.collection == name]
        for doc_id in doomed:
            del self._rows[doc_id]
        live = {r.hash for r in self._rows.values() if r.active}
        for h in [h for h in self._content if h not in live]:
            del self._content[h]
        # ON DELETE CASCADE: rows pinned to deleted content go too
        for doc_id in [i for i, r in self._rows.items() if r.hash not in self._content]:
            del self._rows[doc_id]
        self._collections.pop(name, None)
        return len(doomed)

    def rename_collection(self, old: str, new: str) -> None:
        if old != new and new in self._collections:
            raise QmdError(CONFLICT, f"Collection '{new}' already exists")
        for row in self._rows.values():
            if row.collection == old:
                row.collection = new
        if old in self._collections:
            self._collections = {
                (new if k == old else k): (replace(v, name=new) if k == old else v)
                for k, v in self._collections.items()
            }

    def get_global_context(self) -> str | None:
        return self._config.get("global_context") or None

    def set_global_context(self, text: str | None) -> None:
        self.set_config_value("global_context", text)

    def get_config_value(self, key: str) -> str | None:
        return self._config.get(key)

    def set_config_value(self, key: str, value: str | None) -> None:
        if value is None:
            self._config.pop(key, None)
        else:
            self._config[key] = value

    # ------------------------------------------------------------------ indexing

    def _meta(self, row: _Row) -> DocumentMeta:
        return DocumentMeta(
            id=row.id,
            collection=row.collection,
            path=row.path,
            title=row.title,
            hash=row.hash,
            created_at=row.created_at,
            modified_at=row.modified_at,
            body_length=len(self._content.get(row.hash, "")),
        )

    def _active(self) -> list[_Row]:
        return sorted((r for r in self._rows.values() if r.active), key=lambda r: r.id)

    def active_documents(self, collection: str) -> dict[str, DocumentMeta]:
        return {r.path: self._meta(r) for r in self._active() if r.collection == collection}

    def upsert_document(
        self,
        collection: str,
        path: str,
        title: str,
        content_hash: str,
        body: str,
        created_at: str,
        modified_at: str,
    ) -> UpsertOutcome:
        row = next(
            (r for r in self._rows.values() if r.collection == collection and r.path == path),
            None,
        )
        if row is not None and row.active:
            if row.hash == content_hash:
                if row.title == title:
                    return UpsertOutcome("unchanged")
                row.title = title
                row.modified_at = modified_at
                return UpsertOutcome("updated")
            self._content.setdefault(content_hash, body)
            row.title, row.hash, row.modified_at = title, content_hash, modified_at
            return UpsertOutcome("updated")
        self._content.setdefault(content_hash, body)
        if row is not None:  # an inactive row comes back (created_at kept)
            row.title, row.hash, row.modified_at = title, content_hash, modified_at
            row.active = True
        else:
            self._rows[self._next_id] = _Row(
                self._next_id, collection, path, title, content_hash, created_at, modified_at
            )
            self._next_id += 1
        return UpsertOutcome("indexed")

    def upsert_documents(
        self, collection: str, documents: Sequence[DocumentWrite]
    ) -> list[UpsertOutcome]:
        return [
            self.upsert_document(
                collection, d.path, d.title, d.content_hash, d.body, d.created_at, d.modified_at
            )
            for d in documents
        ]

    def deactivate_documents(self, collection: str, paths: Sequence[str]) -> int:
        wanted = set(paths)
        changed = 0
        for row in self._rows.values():
            if row.active and row.collection == collection and row.path in wanted:
                row.active = False
                changed += 1
        return changed

    def tidy_lexical_index(self, documents_written: int) -> None:
        """Nothing to tidy: the fake's lexical search scans its rows."""

    def delete_orphan_content(self) -> int:
        used = {r.hash for r in self._rows.values()}
        orphans = [h for h in self._content if h not in used]
        for h in orphans:
            del self._content[h]
        return len(orphans)

    # ------------------------------------------------------------------ lookups

    def document_by_docid(self, prefix: str) -> DocumentMeta | None:
        if not prefix:
            return None
        low = _ascii_lower(prefix)
        for row in self._active():
            if _ascii_lower(row.hash).startswith(low):
                return self._meta(row)
        return None

    def document_by_path(self, collection: str, path: str) -> DocumentMeta | None:
        for row in self._active():
            if row.collection == collection and row.path == path:
                return self._meta(row)
        return None

    def document_by_suffix(self, suffix: str) -> DocumentMeta | None:
        low = _ascii_lower(suffix)
        for row in self._active():
            if _ascii_lower(f"qmd://{row.collection}/{row.path}").endswith(low):
                return self._meta(row)
        return None

    def documents(self, collection: str | None = None) -> list[DocumentMeta]:
        rows = self._active()
        return [self._meta(r) for r in rows if collection is None or r.collection == collection]

    def document_paths(self) -> list[tuple[str, str]]:
        return [(m.collection, m.path) for m in self.documents()]

    def body(self, content_hash: str) -> str:
        if content_hash not in self._content:
            raise QmdError(NOT_FOUND, f"Content not found: {content_hash}")
        return self._content[content_hash]

    # ------------------------------------------------------------------ status and upkeep

    def collection_counts(self) -> list[CollectionCount]:
        grouped: dict[str, list[_Row]] = {}
        for row in self._active():
            grouped.setdefault(row.collection, []).append(row)
        return [
            CollectionCount(name, len(rows), max(r.modified_at for r in rows))
            for name, rows in sorted(grouped.items())
        ]

    @property
    def vec_available(self) -> bool:
        return True

    @property
    def lexical_ranking(self) -> str:
        return "in-memory BM25 (tests/fakes.py)"

    def total_documents(self) -> int:
        return len(self._active())

    def vector_count(self) -> int:
        live = {r.hash for r in self._rows.values() if r.active}
        return sum(1 for v in self._vectors.values() if v.hash in live)

    def orphaned_vector_count(self) -> int:
        return len(self._vectors) - self.vector_count()

    def embedded_by_model(self) -> dict[str, int]:
        live = {r.hash for r in self._rows.values() if r.active}
        pairs = {(v.model, v.hash) for v in self._vectors.values() if v.hash in live}
        models = sorted({model for model, _ in pairs})
        return {model: sum(1 for m, _ in pairs if m == model) for model in models}

    def preview_cleanup(self) -> dict[str, int]:
        live = {r.hash for r in self._rows.values() if r.active}
        return {
            "cache_entries": len(self._cache),
            "orphaned_vectors": sum(1 for v in self._vectors.values() if v.hash not in live),
            "inactive_documents": sum(1 for r in self._rows.values() if not r.active),
            "orphaned_content": len(set(self._content) - live),
        }

    def cleanup(self) -> dict[str, int]:
        cache = len(self._cache)
        self._cache.clear()
        live = {r.hash for r in self._rows.values() if r.active}
        orphan_vectors = [k for k, v in self._vectors.items() if v.hash not in live]
        for key in orphan_vectors:
            del self._vectors[key]
        inactive = [i for i, r in self._rows.items() if not r.active]
        for doc_id in inactive:
            del self._rows[doc_id]
        return {
            "cache_entries": cache,
            "orphaned_vectors": len(orphan_vectors),
            "inactive_documents": len(inactive),
            "orphaned_content": self.delete_orphan_content(),
        }

    # ------------------------------------------------------------------ lexical search

    def _columns(self, row: _Row) -> tuple[list[str], list[str], list[str]]:
        return (
            _tokens(f"{row.collection}/{row.path}"),
            _tokens(row.title),
            _tokens(self._content.get(row.hash, "")),
        )

    @staticmethod
    def _term_words(term: LexTerm) -> list[str]:
        return [w for word in term.words for w in _tokens(word)]

    @classmethod
    def _hits(cls, term: LexTerm, column: list[str]) -> int:
        words = cls._term_words(term)
        if not words:
            return 0
        count = 0
        last = len(words) - 1
        for start in range(len(column) - len(words) + 1):
            ok = True
            for i, word in enumerate(words):
                token = column[start + i]
                prefix = term.prefix and i == last
                if not (token.startswith(word) if prefix else token == word):
                    ok = False
                    break
            if ok:
                count += 1
        return count

    @classmethod
    def _clause_matches(cls, clause: LexClause, cols: Sequence[list[str]]) -> bool:
        return all(
            any(cls._hits(t, c) for c in cols) for t in clause.terms if cls._term_words(t)
        ) and any(cls._term_words(t) for t in clause.terms)

    # ------------------------------------------------------------------ metadata

    def put_metadata(self, collection: str, path: str, metadata: Mapping[str, MetaValue]) -> None:
        for row in self._active():
            if row.collection == collection and row.path == path:
                self._metadata[row.id] = dict(metadata)

    def put_metadata_many(
        self, collection: str, entries: Sequence[tuple[str, Mapping[str, MetaValue]]]
    ) -> None:
        for path, metadata in entries:
            self.put_metadata(collection, path, metadata)

    def active_metadata(
        self, collections: Sequence[str] | None, narrowing: Probe | None = None
    ) -> list[tuple[int, dict[str, MetaValue]]]:
        return [
            (row.id, dict(self._metadata.get(row.id, {})))
            for row in self._active()
            if collections is None or row.collection in collections
        ]

    def metadata_by_id(self, ids: Sequence[int]) -> dict[int, dict[str, MetaValue]]:
        return {i: dict(self._metadata[i]) for i in ids if i in self._metadata}

    def search_lex_filled(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> FilledHits:
        return filled_by_two_searches(
            lambda q, n: self.search_lex(q, n, collection, within), query, limit
        )

    def search_lex(
        self,
        query: LexQuery,
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[LexHit]:
        if limit <= 0 or not query.is_searchable:
            return []
        positives = [c for c in query.positives if any(self._term_words(t) for t in c.terms)]
        if not positives:
            return []
        negatives = [c for c in query.negatives if any(self._term_words(t) for t in c.terms)]
        everything = self._active()
        columns = {r.id: self._columns(r) for r in everything}
        total = max(len(everything), 1)
        avg = [max(sum(len(columns[r.id][i]) for r in everything) / total, 1e-9) for i in range(3)]
        terms = [t for c in positives for t in c.terms if self._term_words(t)]
        scored: list[tuple[float, int, _Row]] = []
        for row in everything:
            cols = columns[row.id]
            combine = any if query.match_any else all
            if not combine(self._clause_matches(c, cols) for c in positives):
                continue
            if any(self._clause_matches(c, cols) for c in negatives):
                continue
            score = 0.0
            for term in terms:
                having = sum(
                    1 for r in everything if any(self._hits(term, c) for c in columns[r.id])
                )
                idf = max(math.log((total - having + 0.5) / (having + 0.5)), 1e-6)
                for i, column in enumerate(cols):
                    tf = self._hits(term, column)
                    if tf:
                        norm = 1.2 * (1 - 0.75 + 0.75 * len(column) / avg[i])
                        score += _WEIGHTS[i] * idf * tf * 2.2 / (tf + norm)
            scored.append((-score, row.id, row))
        scored.sort(key=lambda item: (item[0], item[1]))
        hits = [
            LexHit(
                Document(self._meta(row), self._content[row.hash]),
                bm25,
                dict(self._metadata.get(row.id, {})),
            )
            for bm25, _, row in scored
            if (collection is None or row.collection == collection)
            and (within is None or row.id in within)
        ]
        return hits[:limit]

    # ------------------------------------------------------------------ vectors

    def has_vector_index(self) -> bool:
        return self._dims is not None

    def stored_vector_models(self) -> list[str]:
        return sorted({v.model for v in self._vectors.values()})

    def pending_count(
        self, model: str, fingerprint: str, *, also: Sequence[tuple[str, str]] = ()
    ) -> int:
        return len(self.pending_hashes(model, fingerprint, also=also))

    def pending_hashes(
        self, model: str, fingerprint: str, *, also: Sequence[tuple[str, str]] = ()
    ) -> list[str]:
        current = {(model, fingerprint), *also}
        first_path: dict[str, str] = {}
        for row in self._active():
            if row.hash not in first_path or row.path < first_path[row.hash]:
                first_path[row.hash] = row.path
        pending = []
        for content_hash in first_path:
            mine = [
                v
                for v in self._vectors.values()
                if v.hash == content_hash and (v.model, v.fingerprint) in current
            ]
            if not mine or len(mine) < max(v.total for v in mine):
                pending.append(content_hash)
        return sorted(pending, key=lambda h: (first_path[h], h))

    def store_chunk_vectors(
        self,
        content_hash: str,
        chunks: Sequence[tuple[int, int, Sequence[float]]],
        model: str,
        fingerprint: str,
        embedded_at: str,
    ) -> None:
        if not chunks:
            return
        dims = len(chunks[0][2])
        for _, _, vector in chunks:
            if len(vector) != dims:
                raise QmdError(
                    INVALID_ARGUMENT, DIMENSION_MISMATCH.format(existing=dims, current=len(vector))
                )
        if self._dims is not None and self._dims != dims:
            raise QmdError(
                INVALID_ARGUMENT, DIMENSION_MISMATCH.format(existing=self._dims, current=dims)
            )
        self._dims = dims
        for key in [k for k in self._vectors if k[0] == content_hash]:
            del self._vectors[key]
        for seq, pos, vector in chunks:
            self._vectors[(content_hash, seq)] = _Vector(
                content_hash,
                seq,
                pos,
                model,
                fingerprint,
                len(chunks),
                tuple(float(x) for x in vector),
            )

    def clear_vectors(self) -> None:
        self._vectors.clear()
        self._dims = None

    @staticmethod
    def _cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
        dot = sum(x * y for x, y in zip(a, b, strict=True))
        na = math.sqrt(sum(x * x for x in a))
        nb = math.sqrt(sum(y * y for y in b))
        if na == 0 or nb == 0:
            return 1.0
        return 1.0 - dot / (na * nb)

    def search_vectors(
        self,
        vector: Sequence[float],
        limit: int,
        collection: str | None,
        within: frozenset[int] | None = None,
    ) -> list[VectorHit]:
        if limit <= 0 or self._dims is None:
            return []
        if len(vector) != self._dims:
            message = DIMENSION_MISMATCH.format(existing=self._dims, current=len(vector))
            raise QmdError(INVALID_ARGUMENT, message)
        best: dict[tuple[str, str], tuple[float, int, _Row]] = {}
        for row in self._active():
            if collection is not None and row.collection != collection:
                continue
            if within is not None and row.id not in within:
                continue
            for v in self._vectors.values():
                if v.hash != row.hash:
                    continue
                distance = self._cosine_distance(vector, v.embedding)
                key = (row.collection, row.path)
                if key not in best or distance < best[key][0]:
                    best[key] = (distance, v.pos, row)
        ranked = sorted(best.values(), key=lambda item: item[0])[:limit]
        return [
            VectorHit(Document(self._meta(row), self._content[row.hash]), distance, pos)
            for distance, pos, row in ranked
        ]

    # ------------------------------------------------------------------ llm cache

    def get(self, key: str) -> str | None:
        return self._cache.get(key)

    def put(self, key: str, value: str) -> None:
        self._cache[key] = value

    def clear(self) -> None:
        self._cache.clear()


class FakeContentSource:
    """Collection files in memory: `files` maps absolute path → text (None = denied)."""

    def __init__(
        self,
        files: Mapping[str, str | None] | None = None,
        times: Mapping[str, tuple[str, str]] | None = None,
        directories: Sequence[str] = (),
    ) -> None:
        self.files: dict[str, str | None] = dict(files or {})
        self.times: dict[str, tuple[str, str]] = dict(times or {})
        self.directories = {d.rstrip("/") for d in directories}
        # A clock (ns) makes scans report stamps like a file system: `stamps` per absolute
        # path, else one derived from the size; None keeps the stamp-less behaviour.
        self.clock_ns: int | None = None
        self.stamps: dict[str, FileStamp] = {}
        self.reads: list[str] = []  # every read_text call, in order

    def scan(
        self, collection: Collection, *, stamps: bool = True, known: Set[str] = frozenset()
    ) -> ScanResult:
        from domain.globs import glob_match, split_glob_mask

        root = collection.path.rstrip("/")
        if not self.is_directory(root):
            return ScanResult(
                skipped=[SkippedFile("(collection folder)", f"not found: {root}")], unlisted=[""]
            )
        patterns = split_glob_mask(collection.pattern)
        ignores = [
            *(f"**/{d}/**" for d in ("node_modules", ".git", ".cache", "vendor", "dist", "build")),
            *collection.ignore,
        ]
        out = []
        for absolute, text in self.files.items():
            if not absolute.startswith(root + "/"):
                continue
            relative = absolute[len(root) + 1 :]
            if any(part.startswith(".") for part in relative.split("/")):
                continue
            if not any(glob_match(p, relative) for p in patterns):
                continue
            if any(glob_match(g, relative) for g in ignores):
                continue
            created, modified = self.times.get(
                absolute, ("2025-01-01T00:00:00.000Z", "2025-01-01T00:00:00.000Z")
            )
            size = len((text or "").encode("utf-8"))
            stamp = None
            if self.clock_ns is not None:
                stamp = self.stamps.get(absolute) or FileStamp(size, 0, 0, hash(absolute))
            if relative in known:
                continue
            if not stamps:  # the paths alone, as FileSystemSource gives them
                out.append(SourceFile(relative, absolute, "", "", 0))
                continue
            out.append(SourceFile(relative, absolute, created, modified, size, stamp))
        return ScanResult(
            files=sorted(out, key=lambda f: scan_order_key(f.relative_path)),
            started_ns=self.clock_ns,
        )

    def read_text(self, absolute_path: str) -> str | Unreadable:
        self.reads.append(absolute_path)
        text = self.files.get(absolute_path)
        if text is None:
            return Unreadable("cannot be read: Permission denied", transient=True)
        return text

    def is_directory(self, path: str) -> bool:
        target = path.rstrip("/")
        return target in self.directories or any(p.startswith(target + "/") for p in self.files)


class InMemoryFileStamps:
    """FileStampIndex over a dict."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], RecordedStamp] = {}

    def file_stamps(self, collection: str) -> dict[str, RecordedStamp]:
        return {p: r for (c, p), r in self.rows.items() if c == collection}

    def record_file_stamps(self, collection: str, stamps: Mapping[str, RecordedStamp]) -> None:
        for path, recorded in stamps.items():
            self.rows[(collection, path)] = recorded

    def forget_file_stamps(self, collection: str, paths: Sequence[str] | None = None) -> None:
        for key in list(self.rows):
            if key[0] == collection and (paths is None or key[1] in paths):
                del self.rows[key]

    def rename_file_stamps(self, old: str, new: str) -> None:
        if old == new:
            return
        self.forget_file_stamps(new)
        for (collection, path), recorded in list(self.rows.items()):
            if collection == old:
                del self.rows[(collection, path)]
                self.rows[(new, path)] = recorded


class FixedClock:
    def __init__(self, now: str = "2025-01-01T00:00:00.000Z") -> None:
        self.now = now

    def now_iso(self) -> str:
        return self.now


class InMemoryConfigRepository:
    """ConfigRepository over plain dicts."""

    def __init__(self, collections: Sequence[Collection] = (), global_context: str | None = None):
        self.collections: dict[str, Collection] = {c.name: c for c in collections}
        self.global_context = global_context

    def load_collections(self) -> list[Collection]:
        return list(self.collections.values())

    def save_collection(self, collection: Collection) -> None:
        self.collections[collection.name] = collection

    def delete_collection(self, name: str) -> None:
        self.collections.pop(name, None)

    def rename_collection(self, old: str, new: str) -> None:
        if old not in self.collections:
            raise QmdError(NOT_FOUND, f"Collection not found: {old}")
        if new != old and new in self.collections:
            raise QmdError(CONFLICT, f"Collection '{new}' already exists")
        self.collections = {
            (new if k == old else k): (replace(v, name=new) if k == old else v)
            for k, v in self.collections.items()
        }

    def load_global_context(self) -> str | None:
        return self.global_context

    def save_global_context(self, text: str | None) -> None:
        self.global_context = text


class FakeExtractor:
    """DocumentExtractor over in-memory "files": `files` maps absolute path → content; a
    content starting with `FAIL:reason:` fails with that reason; one starting with `SKIP:note:`
    is extracted with `note` in its `skipped` metadata. `calls` counts extractions."""

    def __init__(self, files: Mapping[str, str | None]) -> None:
        self.files = files
        self.calls: list[str] = []
        self.closed = False
        self.version = "fake-extraction 1"

    def digest(self, absolute_path: str) -> SourceDigest | ExtractionFailure:
        content = self.files.get(absolute_path)
        if content is None:
            return ExtractionFailure("unreadable", "cannot be read: Permission denied")
        data = content.encode("utf-8")
        # keyed by the version too, as the real extractor's cache key is
        return SourceDigest(hashlib.sha256(self.version.encode() + data).hexdigest(), len(data))

    def extract(self, absolute_path: str, file_format: str) -> Extracted | ExtractionFailure:
        self.calls.append(absolute_path)
        content = self.files.get(absolute_path) or ""
        if content.startswith("FAIL:"):
            _, reason, detail = content.split(":", 2)
            return ExtractionFailure(reason, detail)
        metadata: dict[str, MetadataValue] = {"format": file_format}
        if content.startswith("SKIP:"):
            _, note, content = content.split(":", 2)
            metadata["skipped"] = [note]
        pages = content.split("\f")
        empty = tuple(n for n, page in enumerate(pages, start=1) if not page.strip())
        text = "\n\n".join(f"## Page {n}\n\n{page or '[no text]'}" for n, page in
                            enumerate(pages, start=1))  # fmt: skip
        return Extracted(text + "\n", metadata, len(pages), empty)

    def close(self) -> None:
        self.closed = True


class InMemoryExtractionLedger:
    """ExtractionLedger over dicts."""

    def __init__(self) -> None:
        self.cache: dict[str, CachedExtraction] = {}
        self.states: dict[tuple[str, str], ExtractionState] = {}

    def cached_extraction(self, source_hash: str) -> CachedExtraction | None:
        return self.cache.get(source_hash)

    def remember_extraction(self, outcome: CachedExtraction) -> None:
        self.cache[outcome.source_hash] = outcome

    def record_states(self, collection: str, states: Sequence[ExtractionState]) -> None:
        self.states = {k: v for k, v in self.states.items() if k[0] != collection}
        self.states.update({(s.collection, s.path): s for s in states})

    def extraction_states(self, collection: str | None = None) -> list[ExtractionState]:
        return [
            state
            for key, state in sorted(self.states.items())
            if collection is None or key[0] == collection
        ]

    def extraction_state(self, collection: str, path: str) -> ExtractionState | None:
        return self.states.get((collection, path))


class InMemoryChunkIndex:
    """ChunkIndex, NamespaceRegistry, SummaryStore and the projmem figures in memory; live
    rows are those whose document is active in `store` with the same content hash."""

    def __init__(self, store: InMemoryStore) -> None:
        self._store = store
        self._rows: dict[int, tuple[int, str, Section]] = {}  # chunk id -> (doc, hash, section)
        self._next = 1
        self._namespaces: dict[str, int] = {}
        self._summaries: dict[str, str] = {}

    def unchunked_documents(self) -> list[tuple[int, str]]:
        cut = {(doc, hash_) for doc, hash_, _ in self._rows.values()}
        return [(m.id, m.hash) for m in self._store.documents() if (m.id, m.hash) not in cut]

    def prune(self) -> int:
        live = self._live()
        stale = [i for i in self._rows if self._located(i, live) is None]
        for chunk_id in stale:
            del self._rows[chunk_id]
        return len(stale)

    def replace_chunks(self, cuts: Sequence[DocumentCut]) -> None:
        self._delete_documents([cut.doc_id for cut in cuts])
        for cut in cuts:
            for section in cut.sections:
                self._rows[self._next] = (cut.doc_id, cut.content_hash, section)
                self._next += 1

    def _delete_documents(self, doc_ids: Sequence[int]) -> int:
        gone = [cid for cid, (doc, _, _) in self._rows.items() if doc in set(doc_ids)]
        for cid in gone:
            del self._rows[cid]
        return len(gone)

    def _live(self) -> dict[int, DocumentMeta]:
        return {meta.id: meta for meta in self._store.documents()}

    def _located(self, chunk_id: int, live: dict[int, DocumentMeta]) -> ChunkRow | None:
        doc, hash_, s = self._rows[chunk_id]
        meta = live.get(doc)
        if meta is None or meta.hash != hash_:
            return None
        return ChunkRow(
            chunk_id,
            meta.collection,
            meta.path,
            s.seq,
            s.heading_path,
            s.start_line,
            s.end_line,
            s.text,
        )

    def get_chunks(self, chunk_ids: Sequence[int]) -> list[ChunkRow]:
        live = self._live()
        found = [self._located(i, live) for i in chunk_ids if i in self._rows]
        return [row for row in found if row is not None]

    def document_chunks(self, collection: str, path: str) -> list[ChunkRow]:
        live = self._live()
        rows = [self._located(i, live) for i in self._rows]
        chosen = [r for r in rows if r is not None and (r.collection, r.path) == (collection, path)]
        return sorted(chosen, key=lambda r: r.seq)

    def live_chunk_count(self, collections: Sequence[str] | None = None) -> int:
        live = self._live()
        rows = [self._located(i, live) for i in self._rows]
        return sum(
            r is not None and (collections is None or r.collection in collections) for r in rows
        )

    def namespace_ids(self, names: Sequence[str]) -> dict[str, int]:
        for name in names:
            if name not in self._namespaces:
                self._namespaces[name] = len(self._namespaces) + 1
        return {name: self._namespaces[name] for name in names}

    def llm_cache_entries(self) -> int:
        return len(self._store._cache)

    def embedding_dimensions(self) -> int | None:
        return self._store._dims

    def get_summary(self, session_id: str) -> str | None:
        return self._summaries.get(session_id)

    def put_summary(self, session_id: str, summary_json: str, updated_at: str) -> None:
        self._summaries[session_id] = summary_json

    def summarized_ids(self) -> set[str]:
        return set(self._summaries)


class InMemorySessions:
    """A SessionSource over transcripts held in memory (most recently written first)."""

    def __init__(self, transcripts: Sequence[Transcript] = ()) -> None:
        self._transcripts = {t.ref.session_id: t for t in transcripts}

    def list_sessions(self) -> list[SessionRef]:
        refs = [t.ref for t in self._transcripts.values()]
        return sorted(refs, key=lambda r: (r.modified_at, r.session_id), reverse=True)

    def read_session(self, session_id: str, window: TurnWindow | None = None) -> Transcript | None:
        transcript = self._transcripts.get(session_id)
        if transcript is None or window is None:
            return transcript
        first, count = window
        kept = tuple(t for t in transcript.turns if first <= t.number < first + count)
        return replace(transcript, turns=kept, turn_count=transcript.total_turns)


def app_over(store: InMemoryStore, models: Models | None = None) -> App:
    """The composition root wired with fakes only: `store` serves every storage port."""
    from adapters.bootstrap import App, Models

    return App(
        store=store,
        lexical=store,
        vectors=store,
        cache=store,
        config=InMemoryConfigRepository(),
        source=FakeContentSource({}),
        clock=FixedClock(),
        models=models or Models(),
        maintenance=store,
        metadata_index=store,
    )


if TYPE_CHECKING:  # structural conformance, checked by mypy
    from adapters.bootstrap import App, Models
    from domain.ports import (
        Clock,
        ConfigRepository,
        ContentSource,
        DocumentExtractor,
        DocumentStore,
        ExtractionLedger,
        FileStampIndex,
        IndexMaintenance,
        LexicalIndex,
        LlmCache,
        MetadataIndex,
        VectorIndex,
    )

    def _conforms(
        store: InMemoryStore,
        source: FakeContentSource,
        clock: FixedClock,
        config: InMemoryConfigRepository,
    ) -> None:
        _store: DocumentStore = store
        _lex: LexicalIndex = store
        _vec: VectorIndex = store
        _cache: LlmCache = store
        _maintenance: IndexMaintenance = store
        _metadata: MetadataIndex = store
        _source: ContentSource = source
        _clock: Clock = clock
        _config: ConfigRepository = config

    def _stamps_conform(stamps: InMemoryFileStamps) -> None:
        _stamps: FileStampIndex = stamps

    def _extraction_conforms(extractor: FakeExtractor, ledger: InMemoryExtractionLedger) -> None:
        _extractor: DocumentExtractor = extractor
        _ledger: ExtractionLedger = ledger

    def _chunk_conforms(chunks: InMemoryChunkIndex) -> None:
        from domain.ports import ChunkIndex, IndexFigures, NamespaceRegistry, SummaryStore

        _chunks: ChunkIndex = chunks
        _names: NamespaceRegistry = chunks
        _summaries: SummaryStore = chunks
        _figures: IndexFigures = chunks


class InMemoryMemoryStore:
    """MemoryStore over two dicts: `files` (path -> markdown text, what people would see)
    and the index rows (id -> (path, text it was made from, record with vector)). A test may
    edit or delete `files` to play a person or a crash."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self._rows: dict[str, tuple[str, str, MemoryRecord]] = {}
        self._topics: dict[str, Topic] = {}
        self._lock = threading.RLock()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._lock:
            yield

    def topics(self) -> list[Topic]:
        return [self._topics[name] for name in sorted(self._topics)]

    def add_topic(self, topic: Topic) -> None:
        self._topics[topic.name] = topic

    def get(self, record_id: str) -> MemoryRecord | None:
        row = self._rows.get(record_id)
        return row[2] if row else None

    def records(self, topic: str | None = None, kind: str | None = None) -> list[MemoryRecord]:
        return [
            r
            for _, _, r in sorted(self._rows.values(), key=lambda row: row[2].id)
            if (topic is None or r.topic == topic) and (kind is None or r.kind == kind)
        ]

    def put(self, records: Sequence[MemoryRecord]) -> None:
        for record in records:
            row = self._rows.get(record.id)
            path = row[0] if row and row[0] in self.files else record_path(record)
            text = render_record(record)
            self.files[path] = text
            self._rows[record.id] = (path, text, record)

    def load(self) -> list[MemoryRecord]:
        found: dict[str, MemoryRecord] = {}
        for path in sorted(self.files):
            record = parse_record(self.files[path])
            if record is None or record.id in found:
                continue
            row = self._rows.get(record.id)
            vector: tuple[float, ...] = ()
            if row is not None and row[1] == self.files[path]:
                vector = row[2].vector
            elif row is not None and (row[2].text, row[2].question, row[2].topic) == (
                record.text,
                record.question,
                record.topic,
            ):
                vector = row[2].vector
                self._rows[record.id] = (path, self.files[path], replace(record, vector=vector))
            found[record.id] = replace(record, vector=vector)
        for gone in set(self._rows) - set(found):
            del self._rows[gone]
        return list(found.values())
