"""`qmd embed`: chunk every document that lacks current vectors, embed the chunks, store them.

Vectors are written per document, all chunks at once, as soon as the last chunk of that document
is embedded. An interrupted run therefore leaves only complete vector sets behind, and the next
run picks up exactly the documents `pending_hashes` still reports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from domain.chunking import (
    CHUNK_OVERLAP_TOKENS,
    CHUNK_SIZE_TOKENS,
    chunk_by_tokens,
    fitted_token_budget,
)
from domain.errors import INTERNAL_ERROR, NOT_FOUND, QmdError
from domain.ports import Clock, DocumentStore, Embedder, VectorIndex, WorkCancelledError

# Fixed texts run through the embedder's formatting so a change of prompt format (not only of
# model) changes the fingerprint and marks every vector stale. Same probes as the original, so
# an index it embedded counts as current here when model and formats agree.
FINGERPRINT_QUERY_PROBE = "__qmd_embedding_query_probe__"
FINGERPRINT_DOC_PROBE = ("__qmd_embedding_title_probe__", "__qmd_embedding_document_probe__")

DEFAULT_BATCH_DOCS = 64
DEFAULT_BATCH_BYTES = 64 * 1024 * 1024
DEFAULT_BATCH_CHUNKS = 32
MAX_ATTEMPTS = 3
ABORT_ERROR_RATIO = 0.8


def embed_fingerprint(
    model_name: str, query_probe: str, doc_probe: str, space: str | None = None
) -> str:
    """First 6 hex digits of sha256 over the lines that determine what a stored vector means.

    `space` (served model and dimension of a remote embedder) is a line only when given, so
    local fingerprints stay the original's.
    """
    lines: tuple[str, ...] = (
        f"model:{model_name}",
        f"query:{query_probe}",
        f"doc:{doc_probe}",
        f"chunk_tokens:{CHUNK_SIZE_TOKENS}",
        f"chunk_overlap_tokens:{CHUNK_OVERLAP_TOKENS}",
    )
    if space is not None:
        lines = (*lines, f"space:{space}")
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:6]


class NamesModel(Protocol):
    """What a fingerprint needs of an embedder at the least: its model's name (a configured
    model not built yet, for `status`, is one too)."""

    @property
    def model_name(self) -> str: ...


@runtime_checkable
class FormatsEmbeddingText(Protocol):
    """Optional extension of `Embedder`: the exact strings it feeds the model."""

    def format_query(self, text: str) -> str: ...
    def format_document(self, title: str, text: str) -> str: ...


@runtime_checkable
class DescribesEmbeddingSpace(Protocol):
    """Optional extension of `Embedder` (remote models): which served model and dimension
    the vectors come from, beyond what the configured name says."""

    def embedding_space(self) -> str: ...


@runtime_checkable
class KnowsInputLimit(Protocol):
    """Optional extension of `Embedder`: how many tokens one text may have before the model
    cuts the rest off. Chunks are sized to fit it (domain/chunking.fitted_token_budget)."""

    @property
    def max_input_tokens(self) -> int: ...


@dataclass(frozen=True)
class FingerprintProbes:
    """What an embedding fingerprint hashes besides the model's name: the probes as the
    model's formats write them, and a remote model's space. With them the fingerprint the
    same model has under another name can be worked out (REQ-VEC-MODEL-001)."""

    query: str
    doc: str
    space: str | None = None

    def fingerprint(self, model_name: str) -> str:
        return embed_fingerprint(model_name, self.query, self.doc, self.space)


def fingerprint_probes(embedder: NamesModel, space: str | None = None) -> FingerprintProbes:
    """`space` overrides the embedder's own `embedding_space()` (which may need the network)."""
    title, text = FINGERPRINT_DOC_PROBE
    if isinstance(embedder, FormatsEmbeddingText):
        query_probe = embedder.format_query(FINGERPRINT_QUERY_PROBE)
        doc_probe = embedder.format_document(title, text)
    else:
        query_probe, doc_probe = FINGERPRINT_QUERY_PROBE, f"{title}\n{text}"
    if space is None and isinstance(embedder, DescribesEmbeddingSpace):
        space = embedder.embedding_space()
    return FingerprintProbes(query_probe, doc_probe, space)


def fingerprint_for(embedder: NamesModel, space: str | None = None) -> str:
    """`space` as in `fingerprint_probes`."""
    return fingerprint_probes(embedder, space).fingerprint(embedder.model_name)


# Whether a model name stored with vectors (first) names the configured model (second): the
# composition root's rule (REQ-VEC-MODEL-001: a model file by what it is); `same_text` where
# none is given.
SameModel = Callable[[str, str], bool]


def same_text(stored: str, current: str) -> bool:
    return stored == current


def other_names_of_model(
    model: str,
    probes: FingerprintProbes | None,
    stored_models: Iterable[str],
    same_model: SameModel,
) -> tuple[tuple[str, str], ...]:
    """The (name, fingerprint) pairs under which stored vectors are the current model's too
    (REQ-VEC-MODEL-001): each other name the vectors carry that `same_model` says names the
    same model, with the fingerprint that name has under the current formats, so vectors
    embedded with other formats (or chunk sizes) stay pending. Without `probes` (a remote
    model's space unknown) there are none. Nothing here rewrites a stored name."""
    if probes is None:
        return ()
    return tuple(
        (name, probes.fingerprint(name))
        for name in sorted(set(stored_models))
        if name != model and same_model(name, model)
    )


@dataclass(frozen=True)
class EmbedProgress:
    """How far an embedding run is, for its progress line."""

    total_documents: int
    done_documents: int
    embedded_chunks: int
    failed_documents: int
    # the run's work in characters of document text (what the model's time follows, unlike
    # a document count), and how much of it is behind: for an ETA (domain/eta.py)
    total_chars: int = 0
    done_chars: float = 0.0


@dataclass(frozen=True)
class EmbedReport:
    """What an embedding run did."""

    model: str
    fingerprint: str
    cleared: bool
    pending_documents: int
    embedded_documents: int
    embedded_chunks: int
    failed_documents: int
    errors: tuple[str, ...] = ()
    # active documents that still lack a complete vector set at the end of the run
    left_pending: int = 0
    chunk_tokens: int = CHUNK_SIZE_TOKENS  # the chunk size used (smaller for a small model)
    input_limit: int | None = None  # the model's input size in tokens, when it says
    truncated_chunks: int = 0  # chunks that still did not fit (a very long title)


@dataclass
class _Doc:
    """One document being embedded: its chunks and the vectors they got."""

    hash: str
    chunks: list[tuple[int, str]]  # (pos, text)
    title: str
    vectors: dict[int, list[float]] = field(default_factory=dict)
    failed: bool = False


def _chunk_shares(doc: _Doc, length: int) -> list[float]:
    """The document's `length` split over its chunks by their sizes (chunks overlap, so their
    own lengths add up to more than the body's)."""
    sizes = [len(text) for _, text in doc.chunks]
    whole = sum(sizes)
    if whole == 0:
        return [length / len(sizes)] * len(sizes)
    return [length * size / whole for size in sizes]


@dataclass(frozen=True)
class EmbedOptions:
    """How one embedding run goes. `fingerprint`: the embedding space the vectors are stored
    under (None: the embedder's own); `collection`: embed only this one's documents
    (`qmd embed -c`); `fit_chunks` False: the original's fixed 900-token chunks even when the
    model reads fewer tokens (what the original stores; for comparisons with it,
    QMD_FIT_CHUNKS=0); `same_model`: whether vectors stored under another name are this
    model's (REQ-VEC-MODEL-001)."""

    fingerprint: str | None = None
    collection: str | None = None
    fit_chunks: bool = True
    same_model: SameModel = same_text


class EmbedIndex:
    def __init__(
        self,
        store: DocumentStore,
        vectors: VectorIndex,
        embedder: Embedder,
        clock: Clock,
        options: EmbedOptions = EmbedOptions(),
    ) -> None:
        self._store = store
        self._vectors = vectors
        self._embedder = embedder
        self._clock = clock
        # the probes once (a remote model's space may take a request); a fingerprint given
        # from outside is the only one the run knows: no other name is this model
        self._probes: FingerprintProbes | None = None
        if options.fingerprint:
            self.fingerprint = options.fingerprint
        else:
            self._probes = fingerprint_probes(embedder)
            self.fingerprint = self._probes.fingerprint(embedder.model_name)
        self._same_model = options.same_model
        self.collection = options.collection
        self.fit_chunks = options.fit_chunks
        self._input_limit: int | None = None
        self._chunk_tokens = CHUNK_SIZE_TOKENS
        self._truncated = 0

    @property
    def model(self) -> str:
        return self._embedder.model_name

    def pending(self, collection: str | None = None) -> list[str]:
        """Content hashes without vectors from this model; with `collection`, only those of
        its documents (`qmd embed -c`: a body shared with another collection is embedded
        once and serves both)."""
        also = other_names_of_model(
            self.model, self._probes, self._vectors.stored_vector_models(), self._same_model
        )
        hashes = self._vectors.pending_hashes(self.model, self.fingerprint, also=also)
        if collection is None:
            return hashes
        wanted = {meta.hash for meta in self._store.documents(collection)}
        return [h for h in hashes if h in wanted]

    def run(
        self,
        force: bool = False,
        progress: Callable[[EmbedProgress], None] | None = None,
        batch_docs: int = DEFAULT_BATCH_DOCS,
        batch_chunks: int = DEFAULT_BATCH_CHUNKS,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> EmbedReport:
        """Embed what is pending; `force` forgets every stored vector first (`qmd embed -f`).

        A chunk batch the embedder fails on is retried up to 3 times; its documents are then
        left pending and reported. More than 80 % failed documents aborts the run. A `QmdError`
        (model missing, dimension mismatch) or an interrupt propagates at once.
        """
        if force:
            self._vectors.clear_vectors()
        pending = self.pending(self.collection)
        if pending and self.fit_chunks and isinstance(self._embedder, KnowsInputLimit):
            self._input_limit = self._embedder.max_input_tokens
        titles, lengths = self._titles_and_lengths()
        total_chars = sum(lengths.get(h, 0) for h in pending)
        done = failed = chunks_done = 0
        done_chars = 0.0
        errors: list[str] = []

        def report() -> None:
            if progress is not None:
                progress(
                    EmbedProgress(len(pending), done, chunks_done, failed, total_chars, done_chars)
                )

        vanished: list[str] = []  # bodies replaced since the listing: nothing left to do
        for batch in self._document_batches(
            pending, max(1, batch_docs), batch_bytes, vanished.append
        ):
            done_chars += sum(lengths.get(h, 0) for h in vanished)
            vanished.clear()
            docs = [self._prepare(h, body, titles.get(h, "")) for h, body in batch]
            shares = {
                d.hash: _chunk_shares(d, lengths.get(d.hash, len(body)))
                for d, (_, body) in zip(docs, batch, strict=True)
            }
            work = [(doc, seq) for doc in docs for seq in range(len(doc.chunks))]
            for start in range(0, len(work), max(1, batch_chunks)):
                group = [(d, s) for d, s in work[start : start + batch_chunks] if not d.failed]
                if not group:
                    continue
                items = [(d.title, d.chunks[s][1]) for d, s in group]
                vectors, error = self._embed_with_retries(items)
                if vectors is None:
                    errors.append(error)
                    for doc, _ in group:
                        if not doc.failed:
                            doc.failed = True
                            failed += 1
                            # its chunks will not be tried again: their work is behind us
                            done_chars += sum(
                                share
                                for seq, share in enumerate(shares[doc.hash])
                                if seq not in doc.vectors
                            )
                    report()
                    continue
                for (doc, seq), vector in zip(group, vectors, strict=True):
                    doc.vectors[seq] = vector
                    done_chars += shares[doc.hash][seq]
                chunks_done += len(group)
                for doc in {id(d): d for d, _ in group}.values():
                    if not doc.failed and len(doc.vectors) == len(doc.chunks):
                        self._store_doc(doc)
                        done += 1
                report()
            if pending and failed > ABORT_ERROR_RATIO * len(pending):
                raise QmdError(
                    INTERNAL_ERROR,
                    f"Embedding aborted: {failed} of {len(pending)} documents failed "
                    f"(last error: {errors[-1] if errors else 'unknown'}).",
                )
        # Counted from the index, not from this loop: whatever the reason (a failed batch,
        # a document edited or added by an update meanwhile), a document still pending at the
        # end is work left undone.
        left = len(self.pending(self.collection))
        return EmbedReport(
            model=self.model,
            fingerprint=self.fingerprint,
            cleared=force,
            pending_documents=len(pending),
            embedded_documents=done,
            embedded_chunks=chunks_done,
            failed_documents=failed,
            errors=tuple(errors),
            left_pending=left,
            chunk_tokens=self._chunk_tokens,
            input_limit=self._input_limit,
            truncated_chunks=self._truncated,
        )

    # ------------------------------------------------------------------ steps

    def _titles_and_lengths(self) -> tuple[dict[str, str], dict[str, int]]:
        """Title per hash from its first active document by path (shared bodies share
        vectors), and each body's length in characters."""
        titles: dict[str, str] = {}
        lengths: dict[str, int] = {}
        for meta in sorted(self._store.documents(), key=lambda m: (m.path, m.collection)):
            titles.setdefault(meta.hash, meta.title)
            lengths.setdefault(meta.hash, meta.body_length)
        return titles, lengths

    def _document_batches(
        self,
        hashes: Sequence[str],
        max_docs: int,
        max_bytes: int,
        vanished: Callable[[str], None],
    ) -> Iterator[list[tuple[str, str]]]:
        """(hash, body) batches of at most `max_docs` documents and about `max_bytes` of text;
        `vanished` hears of each hash whose body is gone."""
        batch: list[tuple[str, str]] = []
        size = 0
        for h in hashes:
            try:
                body = self._store.body(h)
            except QmdError as error:
                if error.code != NOT_FOUND:
                    raise
                # An update replaced this body since the backlog was listed; the new one is
                # pending now and is counted as left undone below.
                vanished(h)
                continue
            length = len(body.encode("utf-8"))
            if batch and (len(batch) >= max_docs or size + length > max_bytes):
                yield batch
                batch, size = [], 0
            batch.append((h, body))
            size += length
        if batch:
            yield batch

    def _prepare(self, content_hash: str, body: str, title: str) -> _Doc:
        limit = self._input_limit
        reserved = 0
        if limit is not None:
            embedder = self._embedder
            framing = (
                embedder.format_document(title, "")
                if isinstance(embedder, FormatsEmbeddingText)
                else f"{title}\n"
            )
            reserved = embedder.count_tokens(framing)
        size, overlap, window = fitted_token_budget(limit, reserved)
        self._chunk_tokens = size
        pieces = chunk_by_tokens(body, self._embedder.count_tokens, size, overlap, window)
        if limit is not None:
            self._truncated += sum(1 for p in pieces if p.tokens + reserved > limit)
        # An empty body still gets one (title-only) vector, or it would stay pending forever.
        chunks = [(p.pos, p.text) for p in pieces] or [(0, body)]
        return _Doc(hash=content_hash, chunks=chunks, title=title)

    def _embed_with_retries(
        self, items: Sequence[tuple[str, str]]
    ) -> tuple[list[list[float]] | None, str]:
        last = ""
        for _ in range(MAX_ATTEMPTS):
            try:
                vectors = self._embedder.embed_documents(items)
            except (QmdError, WorkCancelledError):
                raise  # a missing model, or a request given up: no retry, nothing recorded
            except Exception as exc:  # the embedder's failure modes are open-ended
                last = f"{exc.__class__.__name__}: {exc}"
                continue
            if len(vectors) != len(items):
                last = f"embedder returned {len(vectors)} vectors for {len(items)} texts"
                continue
            return vectors, ""
        return None, last

    def _store_doc(self, doc: _Doc) -> None:
        chunks = [(seq, doc.chunks[seq][0], doc.vectors[seq]) for seq in range(len(doc.chunks))]
        self._vectors.store_chunk_vectors(
            doc.hash, chunks, self.model, self.fingerprint, self._clock.now_iso()
        )
