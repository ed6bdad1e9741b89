"""Collections, contexts and (re)indexing of their folders (docs/spec/index.md, REQ-INDEX-*)."""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any

from domain.errors import CONFLICT, INVALID_ARGUMENT, NOT_FOUND, OUT_OF_ROOT, QmdError
from domain.extraction import ExtractionState, is_extracted
from domain.indexing import ScanResult, SkippedFile, SourceFile, Unreadable, UpdateCounts
from domain.model import DEFAULT_PATTERN, Collection, DocumentMeta
from domain.paths import parse_virtual_path
from domain.ports import (
    Clock,
    ConfigRepository,
    ContentSource,
    DocumentStore,
    DocumentWrite,
    FileStampIndex,
)
from domain.stamps import RecordedStamp, can_skip
from domain.text import content_hash, extract_title
from domain.usecases.extraction import DocumentExtraction
from domain.usecases.metadata import MetadataRecorder

MASK_HINT_KINDS = 5  # file kinds named when a mask matches nothing (REQ-INDEX-MASK-001)
# why `qmd ls` names a readable file the index lacks (REQ-INDEX-LS-SKIPPED-001)
NOT_INDEXED_YET = "not indexed yet (new since the last 'qmd update')"


@dataclass(frozen=True)
class IndexProgress:
    collection: str
    done: int
    total: int
    path: str


ProgressCallback = Callable[[IndexProgress], None]


def _check_name(name: str) -> None:
    """A collection name is the first segment of its documents' `qmd://` paths: not empty,
    no `/`, not `.` or `..` (which URI normalisation would resolve away), and no control
    characters (a newline split every listing that printed the name)."""
    if (
        not name
        or "/" in name
        or name in (".", "..")
        or any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in name)
    ):
        raise QmdError(INVALID_ARGUMENT, f"Invalid collection name: {name!r}")


# documents written together (REQ-INDEX-BATCH-001): as many, or as many characters of text,
# whichever comes first (the texts are held until written)
WRITE_BATCH_DOCUMENTS = 1000
WRITE_BATCH_CHARS = 16_000_000


class _WriteBatch:
    """The documents of an indexing pass waiting to be written, `WRITE_BATCH_DOCUMENTS` at a
    time through `upsert_documents`, each document's metadata recorded once its row exists."""

    def __init__(
        self,
        store: DocumentStore,
        metadata: MetadataRecorder | None,
        collection: str,
        counts: dict[str, int],
    ) -> None:
        self._store = store
        self._metadata = metadata
        self._collection = collection
        self._counts = counts
        self._writes: list[DocumentWrite] = []
        self._sources: list[tuple[SourceFile, Mapping[str, Any]]] = []
        self._chars = 0

    def add(self, write: DocumentWrite, file: SourceFile, extra: Mapping[str, Any]) -> None:
        self._writes.append(write)
        self._sources.append((file, extra))
        self._chars += len(write.body)
        if len(self._writes) >= WRITE_BATCH_DOCUMENTS or self._chars >= WRITE_BATCH_CHARS:
            self.flush()

    def flush(self) -> None:
        if not self._writes:
            return
        outcomes = self._store.upsert_documents(self._collection, self._writes)
        for outcome in outcomes:
            self._counts[outcome.kind] = self._counts.get(outcome.kind, 0) + 1
        if self._metadata is not None:
            self._metadata.record_many(
                self._collection,
                [
                    (file, write.body, extra or None)
                    for write, (file, extra) in zip(self._writes, self._sources, strict=True)
                ],
            )
        self._writes, self._sources, self._chars = [], [], 0


@dataclass(frozen=True)
class IndexingParts:
    """What indexing may use besides the store, each given by the composition root where the
    index and the process have it (None: indexing goes without)."""

    # PDF, DOCX, PPTX, XLSX and HTML files are indexed through it (REQ-EXTRACT-001); without
    # it they are read as text like any other file (and refused as binary)
    extraction: DocumentExtraction | None = None
    # records each document's metadata (REQ-META-001)
    metadata: MetadataRecorder | None = None
    # under --force-root: may this collection be added and indexed at all (the scope policy,
    # REQ-SEC-SCOPE-001); None: every one may
    admits: Callable[[Collection], bool] | None = None
    # lets an update skip unchanged files (REQ-INDEX-NOOP-001)
    stamps: FileStampIndex | None = None


class CollectionManager:
    """Keeps the user's config and the index mirror in step, and indexes folders."""

    def __init__(
        self,
        store: DocumentStore,
        config: ConfigRepository,
        source: ContentSource,
        clock: Clock,
        parts: IndexingParts | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._source = source
        self._clock = clock
        given = parts or IndexingParts()
        self._extraction = given.extraction
        self.metadata = given.metadata
        self.admits = given.admits
        self.stamps = given.stamps

    # -- configuration ------------------------------------------------------------------------

    def list(self) -> list[Collection]:
        return self._store.list_collections()

    def get(self, name: str) -> Collection:
        collection = self._store.get_collection(name)
        if collection is None:
            raise QmdError(NOT_FOUND, f"Collection not found: {name}")
        return collection

    def add(
        self,
        path: str,
        name: str | None = None,
        pattern: str = DEFAULT_PATTERN,
        progress: ProgressCallback | None = None,
        *,
        refuse_unmatched: bool = False,
    ) -> tuple[Collection, UpdateCounts]:
        """Register a folder and index it immediately. With `refuse_unmatched`, a mask that
        matches none of the files the folder holds adds nothing (REQ-INDEX-MASK-001)."""
        root = path.rstrip("/") or "/"
        if not self._source.is_directory(root):
            raise QmdError(NOT_FOUND, f"Collection path is not a directory: {root}")
        chosen = name or posixpath.basename(root)
        _check_name(chosen)
        if self.name_taken(chosen):
            raise QmdError(CONFLICT, f"Collection '{chosen}' already exists.")
        for existing in self._store.list_collections():
            if existing.path == root and existing.pattern == pattern:
                raise QmdError(
                    CONFLICT,
                    f"A collection already exists for this path and pattern: {existing.name}",
                )
        collection = Collection(name=chosen, path=root, pattern=pattern)
        self._require_admitted(collection)
        scan = self._source.scan(collection)
        if refuse_unmatched and not scan.files and not scan.skipped:
            self._refuse_unmatched(collection)
        self._config.save_collection(collection)
        self._store.put_collection(collection)
        # through `index`, which a subclass extends (ChunkedCollections cuts the chunk rows)
        return collection, self.index(collection, progress, scan=scan)

    def _refuse_unmatched(self, collection: Collection) -> None:
        """Refuse a mask that matches nothing in a folder that holds files: a mistyped mask
        (`*.MD`, `*.markdown` for `.md` notes) would otherwise leave an empty collection that
        every later update keeps empty. The error lists the kinds of file the folder holds. A
        folder with no file at all is added: it is being set up to be filled."""
        everything = self._source.scan(replace(collection, pattern="**/*"))
        if not everything.files:
            return
        kinds: dict[str, int] = {}
        for found in everything.files:
            name = found.relative_path.rsplit("/", 1)[-1]
            dot = name.rfind(".")
            kind = name[dot:] if dot > 0 else "(no extension)"
            kinds[kind] = kinds.get(kind, 0) + 1
        ranked = sorted(kinds.items(), key=lambda item: (-item[1], item[0]))
        listed = ", ".join(f"{count} {kind}" for kind, count in ranked[:MASK_HINT_KINDS])
        if len(ranked) > MASK_HINT_KINDS:
            listed += f", {len(ranked) - MASK_HINT_KINDS} more kinds"
        first = next((kind for kind, _ in ranked if kind.startswith(".")), None)
        hint = f" (for example --mask '**/*{first}')" if first else ""
        total = len(everything.files)
        raise QmdError(
            INVALID_ARGUMENT,
            f"No file in {collection.path} matches the mask '{collection.pattern}'; nothing "
            f"was added.\nThe folder holds {total} file{'s' if total != 1 else ''}: {listed}.\n"
            f"Masks are case-sensitive globs; add the folder again with a mask that names "
            f"them{hint}.",
        )

    def name_taken(self, name: str) -> bool:
        """A collection of that name exists in the index or the config, seen or not: a
        scoped view (`--force-root`) hides outside collections, and adding one under a
        hidden name would overwrite it (REQ-SEC-SCOPE-003)."""
        if self._store.get_collection(name) is not None:
            return True
        return any(c.name == name for c in self._config.load_collections())

    def remove(self, name: str) -> int:
        self.get(name)
        self._config.delete_collection(name)
        removed = self._store.delete_collection(name)
        if self.stamps is not None:
            self.stamps.forget_file_stamps(name)
        self._store.delete_orphan_content()
        self.tidy_lexical_index(removed)
        return removed

    def rename(self, old: str, new: str) -> None:
        self.get(old)
        _check_name(new)
        if self.name_taken(new):
            raise QmdError(CONFLICT, f"Collection '{new}' already exists.")
        # the index first: writing the config may mirror it into the index (which then
        # must already hold the documents under the new name)
        self._store.rename_collection(old, new)
        self._config.rename_collection(old, new)
        if self.stamps is not None:
            self.stamps.rename_file_stamps(old, new)

    def set_included(self, name: str, included: bool) -> Collection:
        updated = replace(self.get(name), include_by_default=included)
        self._save(updated)
        return updated

    def set_update_command(self, name: str, command: str | None) -> Collection:
        updated = replace(self.get(name), update_command=command or None)
        self._save(updated)
        return updated

    def _save(self, collection: Collection) -> None:
        self._config.save_collection(collection)
        self._store.put_collection(collection)

    # -- contexts -----------------------------------------------------------------------------

    def add_context(self, target: str, text: str) -> str:
        """`/` = global; `qmd://c/prefix`; or an absolute path inside a collection folder.

        Returns a description of where the context was stored.
        """
        if not text.strip():
            raise QmdError(INVALID_ARGUMENT, "Context text must not be empty.")
        if target == "/":
            self._config.save_global_context(text)
            self._store.set_global_context(text)
            return "global context"
        collection, prefix = self._context_target(target)
        contexts = dict(collection.contexts)
        contexts[prefix] = text
        self._save(replace(collection, contexts=contexts))
        return f"qmd://{collection.name}/{prefix}"

    def remove_context(self, target: str) -> str:
        if target == "/":  # like the original: removing an unset global context is no error
            self._config.save_global_context(None)
            self._store.set_global_context(None)
            return "global context"
        collection, prefix = self._context_target(target)
        if prefix not in collection.contexts:
            raise QmdError(NOT_FOUND, f"No context set for qmd://{collection.name}/{prefix}")
        contexts = {k: v for k, v in collection.contexts.items() if k != prefix}
        self._save(replace(collection, contexts=contexts))
        return f"qmd://{collection.name}/{prefix}"

    def list_contexts(self) -> builtins.list[tuple[str, str]]:
        """(`qmd://c/prefix` or `/`, text) pairs, global first."""
        rows: builtins.list[tuple[str, str]] = []
        global_context = self._store.get_global_context()
        if global_context:
            rows.append(("/", global_context))
        for collection in self._store.list_collections():
            for prefix, text in sorted(collection.contexts.items()):
                rows.append((f"qmd://{collection.name}/{prefix}", text))
        return rows

    def _context_target(self, target: str) -> tuple[Collection, str]:
        if target.startswith("qmd:"):
            virtual = parse_virtual_path(target)
            if virtual is None or not virtual.collection:
                raise QmdError(INVALID_ARGUMENT, f"Invalid qmd:// path: {target}")
            return self.get(virtual.collection), virtual.path.strip("/")
        for collection in self._store.list_collections():
            root = collection.path.rstrip("/")
            if target == root:
                return collection, ""
            if target.startswith(root + "/"):
                return collection, target[len(root) + 1 :].strip("/")
        raise QmdError(NOT_FOUND, f"Path is not in any indexed collection: {target}")

    # -- indexing -----------------------------------------------------------------------------

    def update(
        self,
        names: Sequence[str] | None = None,
        progress: ProgressCallback | None = None,
        *,
        tidy: bool = True,
    ) -> dict[str, UpdateCounts]:
        """Re-scan collections. The LLM cache is kept (its keys name the model,
        REQ-INDEX-LLMCACHE-001; the original empties it here). The lexical index is tidied
        once, for what the whole run wrote (REQ-INDEX-FTS-TIDY-001): collections each under
        the share may add up to more. `tidy=False` leaves that to a
        caller that updates one collection at a time (`qmd update`: `tidy_lexical_index`)."""
        targets = [self.get(n) for n in names] if names else self._store.list_collections()
        counts = {c.name: self.index(c, progress, tidy=False) for c in targets}
        if tidy:
            self.tidy_lexical_index(sum(c.written for c in counts.values()))
        return counts

    def not_indexed(
        self, collection: Collection, indexed: Set[str] | None = None
    ) -> builtins.list[SkippedFile]:
        """The files of the collection's folder that the index does not hold, each with why
        (REQ-INDEX-LS-SKIPPED-001): what the scan had to skip, content `update` refuses
        (binary, too large, unreadable) with its reason, an extraction the last update
        recorded as failed, or a file new since the last update. Blank files are left out, as
        `update` skips them without a word. Only the files the index lacks are read, and an
        extraction is never run: its recorded state is the answer. A collection this app may
        not index (outside the permitted root) is not read: nothing is named. `indexed`: the
        paths the index holds, when the caller has just read them (`qmd ls` lists them).

        The folder is scanned without stamps and leaving out the indexed files (no stat, no
        birth time, no record per indexed file: about a listing's cost, benchmarks/bench_ls.py)."""
        if self.admits is not None and not self.admits(collection):
            return []
        if indexed is None:
            indexed = set(self._store.active_documents(collection.name))
        scan = self._source.scan(collection, stamps=False, known=indexed)
        found = list(scan.skipped)
        for file in scan.files:
            path = file.relative_path
            if self._extraction is not None and is_extracted(path):
                state = self._extraction.recorded_state(collection.name, path)
                if state is not None and state.status == "failed":
                    detail = f" ({state.detail})" if state.detail else ""
                    found.append(
                        SkippedFile(path, f"could not be extracted: {state.reason}{detail}")
                    )
                else:
                    found.append(SkippedFile(path, NOT_INDEXED_YET))
                continue
            text = self._source.read_text(file.absolute_path)
            if isinstance(text, Unreadable):
                found.append(SkippedFile(path, text.reason))
            elif text.strip():
                found.append(SkippedFile(path, NOT_INDEXED_YET))
        return sorted(found, key=lambda skipped: skipped.path)

    def index(
        self,
        collection: Collection,
        progress: ProgressCallback | None = None,
        extra_metadata: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        tidy: bool = True,
        scan: ScanResult | None = None,
    ) -> UpdateCounts:
        """Index one collection folder. `extra_metadata`: more fields per relative path (an
        extractor's title, author, pages...), merged into the documents' metadata. `tidy`:
        end by tidying the lexical index for what this pass wrote, in its transaction.
        `scan`: the folder as the caller has just scanned it (`add`), not scanned again."""
        self._require_admitted(collection)
        found = self._source.scan(collection) if scan is None else scan
        return self._index_scanned(collection, found, progress, extra_metadata or {}, tidy=tidy)

    def _index_scanned(
        self,
        collection: Collection,
        scan: ScanResult,
        progress: ProgressCallback | None,
        extra_metadata: Mapping[str, Mapping[str, Any]],
        *,
        tidy: bool = True,
    ) -> UpdateCounts:
        # One transaction per collection: several times faster than a commit per file, and
        # an interrupted update leaves the previous state intact.
        with self._store.transaction():
            counts = self._index_files(collection, scan, progress, extra_metadata)
            if tidy and counts.written:
                self._store.tidy_lexical_index(counts.written)
            return counts

    def tidy_lexical_index(self, written: int) -> None:
        """A run that wrote `written` documents, over one or more transactions, has ended: the
        store may reorganise its lexical index (REQ-INDEX-FTS-TIDY-001)."""
        if written > 0:
            with self._store.transaction():
                self._store.tidy_lexical_index(written)

    def _require_admitted(self, collection: Collection) -> None:
        if self.admits is not None and not self.admits(collection):
            raise QmdError(OUT_OF_ROOT, f"Outside the permitted root: {collection.path}")

    def _index_files(
        self,
        collection: Collection,
        scan: ScanResult,
        progress: ProgressCallback | None,
        extra_metadata: Mapping[str, Mapping[str, Any]],
    ) -> UpdateCounts:
        known = self._store.active_documents(collection.name)
        files = scan.files
        counts = {"indexed": 0, "updated": 0, "unchanged": 0, "skipped": len(scan.skipped)}
        problems = list(scan.skipped)
        # What lies below a folder that could not be listed is unknown, not deleted: keep it.
        seen: set[str] = {
            path for path in known for prefix in scan.unlisted if path.startswith(prefix)
        }
        states: list[ExtractionState] = []
        started = scan.started_ns
        stamps = self.stamps if started is not None else None
        recorded = stamps.file_stamps(collection.name) if stamps is not None else {}
        fresh: dict[str, RecordedStamp] = {}
        batch = _WriteBatch(self._store, self.metadata, collection.name, counts)
        for done, file in enumerate(files, start=1):
            if progress is not None:
                progress(IndexProgress(collection.name, done, len(files), file.relative_path))
            if recorded and self._unchanged(collection, file, recorded, known, extra_metadata):
                # Not read at all (REQ-INDEX-NOOP-001): what is indexed is what it holds.
                seen.add(file.relative_path)
                counts["unchanged"] += 1
                if self._extraction is not None and is_extracted(file.relative_path):
                    state = self._extraction.recorded_state(collection.name, file.relative_path)
                    if state is not None:
                        states.append(state)
                continue
            title: str | None = None
            extracted_metadata: Mapping[str, Any] = {}
            if self._extraction is not None and is_extracted(file.relative_path):
                got = self._extraction.obtain(collection.name, file)
                states.append(got.state)
                if got.text is None:
                    # Recorded in the index and listed by `status` (REQ-EXTRACT-005); a
                    # previously indexed version is removed like a deleted file below.
                    detail = f" ({got.state.detail})" if got.state.detail else ""
                    problems.append(
                        SkippedFile(
                            file.relative_path,
                            f"could not be extracted: {got.state.reason}{detail}",
                        )
                    )
                    counts["skipped"] += 1
                    continue
                text: str | Unreadable = got.text
                title = got.title
                # the extractor's title, author, created, pages… (REQ-META-001)
                extracted_metadata = got.metadata or {}
            else:
                text = self._source.read_text(file.absolute_path)
            if isinstance(text, Unreadable):
                reason = text.reason
                if text.transient and file.relative_path in known:
                    # Denied or failing for now (as the original): keep what was indexed.
                    seen.add(file.relative_path)
                    reason += " (the indexed version is kept)"
                # Refused content (binary, too large) is removed like a deleted file below.
                problems.append(SkippedFile(file.relative_path, reason))
                counts["skipped"] += 1
                continue
            if not text.strip():  # silently, as the original does
                counts["skipped"] += 1
                continue
            seen.add(file.relative_path)
            digest = content_hash(text)
            previous = known.get(file.relative_path)
            created = previous.created_at if previous else file.created_at
            title = title or extract_title(text, posixpath.basename(file.relative_path))
            given = extra_metadata.get(file.relative_path)
            extra = {**extracted_metadata, **given} if given else extracted_metadata
            batch.add(
                DocumentWrite(file.relative_path, title, digest, text, created, file.modified_at),
                file,
                extra,
            )
            if stamps is not None and started is not None and file.stamp is not None:
                reader = self._reader_of(file.relative_path)
                fresh[file.relative_path] = RecordedStamp(
                    file.stamp, started, digest, title, reader
                )
        batch.flush()
        if self._extraction is not None:
            self._extraction.record(collection.name, states)
        gone = [path for path in known if path not in seen]
        removed = self._store.deactivate_documents(collection.name, gone) if gone else 0
        if stamps is not None:
            if fresh:
                stamps.record_file_stamps(collection.name, fresh)
            stale = [path for path in recorded if path not in seen]
            if stale:
                stamps.forget_file_stamps(collection.name, stale)
        if counts["indexed"] or counts["updated"] or removed:
            # only a changed or removed document can leave content unused (a scan of the
            # whole content table otherwise)
            self._store.delete_orphan_content()
        return UpdateCounts(
            indexed=counts["indexed"],
            updated=counts["updated"],
            unchanged=counts["unchanged"],
            removed=removed,
            skipped=counts["skipped"],
            problems=tuple(sorted(problems, key=lambda p: p.path)),
        )

    def _reader_of(self, path: str) -> str:
        """What reads `path`: the extractor's version for an extracted file, else ""."""
        if self._extraction is not None and is_extracted(path):
            return self._extraction.reader_version
        return ""

    def _unchanged(
        self,
        collection: Collection,
        file: SourceFile,
        recorded: Mapping[str, RecordedStamp],
        known: Mapping[str, DocumentMeta],
        extra_metadata: Mapping[str, Mapping[str, Any]],
    ) -> bool:
        """The file is what the index holds, by its stamp alone (REQ-INDEX-NOOP-001)."""
        path = file.relative_path
        if path in extra_metadata:
            return False  # fields given for this run must be recorded
        if self.metadata is not None and self.metadata.extra is not None:
            return False  # an outside source of metadata may have changed
        last = recorded.get(path)
        if not can_skip(file.stamp, last, known.get(path)):
            return False
        if last is None or last.reader != self._reader_of(path):
            return False  # read by another extractor version: extract it again
        if self._extraction is not None and is_extracted(path):
            state = self._extraction.recorded_state(collection.name, path)
            return state is not None and state.status == "ok"
        return True
