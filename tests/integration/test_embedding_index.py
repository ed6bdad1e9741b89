"""`EmbedIndex` over the in-memory store and SQLite: resumable, all-or-nothing per document."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from adapters.models.llama import LlamaEmbedder
from adapters.models.references import DEFAULT_MODELS, PREPARED_EMBED_FILE
from adapters.sqlite.store import SqliteIndex
from domain.errors import INTERNAL_ERROR, QmdError
from domain.ports import WorkCancelledError
from domain.text import content_hash
from domain.usecases.embedding import (
    EmbedIndex,
    EmbedOptions,
    EmbedProgress,
    embed_fingerprint,
    fingerprint_for,
)
from tests.fakes import FixedClock, InMemoryStore
from tests.model_fakes import FakeEmbedder, FlakyEmbedder, prepared_model

StoreLike = InMemoryStore | SqliteIndex
T0 = "2025-01-01T00:00:00.000Z"


@pytest.fixture(params=["fake", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreLike]:
    if request.param == "fake":
        yield InMemoryStore()
        return
    index = SqliteIndex.open(tmp_path / "index.sqlite")
    try:
        yield index
    finally:
        index.close()


def add(store: StoreLike, collection: str, path: str, body: str, title: str = "") -> str:
    digest = content_hash(body)
    store.upsert_document(collection, path, title or path, digest, body, T0, T0)
    return digest


def long_body(topic: str, words: int) -> str:
    """Markdown with headings every 100 words so the chunker has break points."""
    parts = []
    for i in range(words // 100):
        parts.append(f"## {topic} part {i}\n\n" + " ".join(f"{topic}{i}w{j}" for j in range(100)))
    return "\n\n".join(parts)


def seed(store: StoreLike, docs: int = 10) -> list[str]:
    hashes = [
        add(store, "notes", f"doc{i:02d}.md", f"# Note {i}\n\nshort body number {i}")
        for i in range(docs)
    ]
    hashes.append(add(store, "notes", "long.md", long_body("long", 2500)))
    return hashes


def vector_sets(store: StoreLike) -> dict[str, tuple[int, int]]:
    """hash -> (stored chunk count, declared total) for every hash with any vector."""
    if isinstance(store, SqliteIndex):
        rows = store.connection.query(
            "SELECT hash, COUNT(*), MAX(total_chunks), MIN(total_chunks), "
            "COUNT(DISTINCT seq) FROM content_vectors GROUP BY hash"
        )
        vec_rows = (
            store.connection.scalar("SELECT COUNT(*) FROM vectors_vec")
            if store.has_vector_index()
            else 0
        )
        assert vec_rows == sum(int(r[1]) for r in rows), (
            "vectors_vec out of step with content_vectors"
        )
        for r in rows:
            assert r[2] == r[3] and r[1] == r[4], f"inconsistent rows for {r[0]}"
        return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}
    sets: dict[str, tuple[int, int]] = {}
    for (digest, _seq), vector in store._vectors.items():
        count, _ = sets.get(digest, (0, 0))
        sets[digest] = (count + 1, vector.total)
    return sets


def assert_consistent(store: StoreLike) -> dict[str, tuple[int, int]]:
    sets = vector_sets(store)
    partial = {h: s for h, s in sets.items() if s[0] != s[1]}
    assert not partial, f"partial vector sets: {partial}"
    return sets


# ------------------------------------------------------------------------------ fingerprint


def test_fingerprint_matches_the_original_for_its_default_models() -> None:
    # Values computed by @tobilu/qmd 2.8.3's getEmbeddingFingerprint for the same URIs.
    gemma = LlamaEmbedder(DEFAULT_MODELS["embed"])
    qwen = LlamaEmbedder("hf:Qwen/Qwen3-Embedding-0.6B-GGUF/Qwen3-Embedding-0.6B-Q8_0.gguf")
    assert fingerprint_for(gemma) == "c37385"
    assert fingerprint_for(qwen) == "3f4dfd"


def test_fingerprint_changes_with_model_and_format() -> None:
    base = embed_fingerprint("m", "q", "d")
    assert len(base) == 6 and int(base, 16) >= 0
    assert embed_fingerprint("m2", "q", "d") != base
    assert embed_fingerprint("m", "q2", "d") != base
    assert embed_fingerprint("m", "q", "d2") != base
    assert embed_fingerprint("m", "q", "d") == base


# ------------------------------------------------------------------------------ runs


def test_run_embeds_every_pending_document_once(store: StoreLike) -> None:
    hashes = seed(store)
    embedder = FakeEmbedder()
    use_case = EmbedIndex(store, store, embedder, FixedClock())
    events: list[EmbedProgress] = []
    report = use_case.run(progress=events.append, batch_docs=4, batch_chunks=3)

    assert report.pending_documents == len(hashes)
    assert report.embedded_documents == len(hashes)
    assert report.failed_documents == 0 and report.left_pending == 0
    assert report.fingerprint == fingerprint_for(embedder)
    assert use_case.pending() == []
    sets = assert_consistent(store)
    assert set(sets) == set(hashes)
    assert sets[hashes[-1]][0] > 1  # the long document was split
    assert report.embedded_chunks == sum(count for count, _ in sets.values())
    done = [e.done_documents for e in events]
    assert done == sorted(done) and done[-1] == len(hashes)

    calls = embedder.calls
    again = use_case.run()
    assert again.pending_documents == 0 and embedder.calls == calls


def test_vectors_are_chunk_embeddings_with_the_title(store: StoreLike) -> None:
    digest = add(store, "notes", "a.md", "cats sleep all day", title="Cats")
    embedder = FakeEmbedder()
    EmbedIndex(store, store, embedder, FixedClock()).run()
    (hit,) = store.search_vectors(
        embedder.embed_documents([("Cats", "cats sleep all day")])[0], 5, None
    )
    assert hit.document.meta.hash == digest
    assert hit.distance == pytest.approx(0.0, abs=1e-5)


def test_shared_and_empty_bodies(store: StoreLike) -> None:
    shared = add(store, "a", "x.md", "same text")
    add(store, "b", "y.md", "same text")
    empty = add(store, "a", "empty.md", "")
    report = EmbedIndex(store, store, FakeEmbedder(), FixedClock()).run()
    assert report.embedded_documents == 2
    assert assert_consistent(store) == {shared: (1, 1), empty: (1, 1)}


def test_force_re_embeds_everything(store: StoreLike) -> None:
    hashes = seed(store, docs=3)
    use_case = EmbedIndex(store, store, FakeEmbedder(), FixedClock())
    use_case.run()
    report = use_case.run(force=True)
    assert report.cleared and report.embedded_documents == len(hashes)
    assert set(assert_consistent(store)) == set(hashes)


def test_other_model_or_fingerprint_needs_its_own_vectors(store: StoreLike) -> None:
    hashes = seed(store, docs=2)
    EmbedIndex(store, store, FakeEmbedder(), FixedClock()).run()
    other = EmbedIndex(store, store, FakeEmbedder(model_name="other"), FixedClock())
    assert other.pending() == store.pending_hashes("other", other.fingerprint)
    assert set(other.pending()) == set(hashes)
    pinned = EmbedIndex(
        store, store, FakeEmbedder(), FixedClock(), EmbedOptions(fingerprint="abcdef")
    )
    assert set(pinned.pending()) == set(hashes)


# ------------------------------------------------------------------------------ failures


def test_interrupted_run_leaves_complete_sets_and_resumes(store: StoreLike) -> None:
    hashes = seed(store)
    flaky = FlakyEmbedder(ok_calls=3, error=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        EmbedIndex(store, store, flaky, FixedClock()).run(batch_docs=4, batch_chunks=2)

    sets = assert_consistent(store)
    assert 0 < len(sets) < len(hashes)
    resumed = EmbedIndex(store, store, FakeEmbedder(), FixedClock())
    assert set(resumed.pending()) == set(hashes) - set(sets)
    report = resumed.run(batch_docs=4, batch_chunks=2)
    assert report.embedded_documents == len(hashes) - len(sets)
    assert resumed.pending() == []
    assert set(assert_consistent(store)) == set(hashes)


class PoisonEmbedder(FakeEmbedder):
    """Fails on every batch that contains the word `poison`; `transient` failures fail once."""

    def __init__(self, transient: int = 0) -> None:
        super().__init__()
        self.transient = transient

    def embed_documents(self, items: Sequence[tuple[str, str]]) -> list[list[float]]:
        if self.transient > 0:
            self.transient -= 1
            raise RuntimeError("temporary failure")
        if any("poison" in text for _, text in items):
            raise RuntimeError("cannot embed this")
        return super().embed_documents(items)


def test_failed_documents_stay_pending_and_are_reported(store: StoreLike) -> None:
    hashes = seed(store, docs=5)
    bad = add(store, "notes", "bad.md", "poison pill")
    report = EmbedIndex(store, store, PoisonEmbedder(), FixedClock()).run(batch_chunks=1)
    assert report.failed_documents == 1 and report.left_pending == 1
    assert report.errors and "cannot embed this" in report.errors[0]
    assert store.pending_hashes(report.model, report.fingerprint) == [bad]
    assert set(assert_consistent(store)) == set(hashes)


def test_transient_failures_are_retried(store: StoreLike) -> None:
    hashes = seed(store, docs=3)
    report = EmbedIndex(store, store, PoisonEmbedder(transient=2), FixedClock()).run()
    assert report.failed_documents == 0 and report.errors == ()
    assert set(assert_consistent(store)) == set(hashes)


def test_a_run_whose_request_is_given_up_stops_without_retrying(store: StoreLike) -> None:
    """REQ-SEARCH-CANCEL-MODEL-001: the embedder stops with WorkCancelledError; that is not a
    failure of the document (no retry, nothing reported failed), the run ends with it."""
    hashes = seed(store, docs=3)
    given_up = FlakyEmbedder(ok_calls=1, error=WorkCancelledError("given up"))
    with pytest.raises(WorkCancelledError):
        EmbedIndex(store, store, given_up, FixedClock()).run(batch_docs=1, batch_chunks=1)
    assert given_up.document_calls == 2  # one batch embedded, then the one given up: no retry
    resumed = EmbedIndex(store, store, FakeEmbedder(), FixedClock())
    assert len(resumed.pending()) == len(hashes) - 1  # every other document still pending
    assert set(assert_consistent(store)) < set(hashes)


def test_mostly_failing_run_aborts(store: StoreLike) -> None:
    for i in range(5):
        add(store, "notes", f"p{i}.md", f"poison number {i}")
    with pytest.raises(QmdError) as raised:
        EmbedIndex(store, store, PoisonEmbedder(), FixedClock()).run(batch_chunks=1)
    assert raised.value.code == INTERNAL_ERROR
    assert "5 of 5" in raised.value.message
    assert_consistent(store)


# ------------------------------------------------------------------------------ real model


@pytest.mark.models
def test_minilm_embeddings_find_the_right_document(tmp_path: Path) -> None:
    index = SqliteIndex.open(tmp_path / "index.sqlite")
    embedder = LlamaEmbedder(str(prepared_model(PREPARED_EMBED_FILE)))
    try:
        cats = add(index, "notes", "cats.md", "# Cats\n\nCats sleep up to sixteen hours a day.")
        add(index, "notes", "tax.md", "# Taxes\n\nQuarterly tax filings are due in April.")
        # ~1600 one-token words: two chunks of at most 900 tokens
        fox = "## Foxes\n\n" + "The quick brown fox jumps over the lazy dog. " * 40
        add(index, "notes", "long.md", "\n\n".join([fox] * 4))
        report = EmbedIndex(index, index, embedder, FixedClock()).run()
        assert report.embedded_documents == 3 and report.failed_documents == 0
        assert embedder.dimensions == 384
        assert index.vector_dimensions() == 384
        sets = assert_consistent(index)
        assert max(count for count, _ in sets.values()) > 1
        (query,) = embedder.embed_queries(["how long do cats sleep"])
        hits = index.search_vectors(query, 3, None)
        assert hits[0].document.meta.hash == cats
    finally:
        embedder.close()
        index.close()


class EditedDuringRun:
    """The store as a concurrent `qmd update` leaves it: the first body read finds that
    document already edited (its old content deleted, a new version pending)."""

    def __init__(self, inner: StoreLike) -> None:
        self._inner = inner
        self.edited = False

    def body(self, content_hash: str) -> str:
        if not self.edited:
            self.edited = True
            add(self._inner, "notes", "doc00.md", "# Note 0\n\nedited while embedding")
            self._inner.delete_orphan_content()
        return self._inner.body(content_hash)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_a_document_edited_during_the_run_is_skipped_then_reported_left(
    store: StoreLike,
) -> None:
    hashes = seed(store, docs=3)
    racing = EditedDuringRun(store)
    report = EmbedIndex(racing, store, FakeEmbedder(), FixedClock()).run()  # type: ignore[arg-type]
    assert racing.edited
    assert report.failed_documents == 0
    assert report.embedded_documents == len(hashes) - 1
    assert report.left_pending == 1  # the edited version: this run never saw it
    edited = content_hash("# Note 0\n\nedited while embedding")
    assert store.pending_hashes(report.model, report.fingerprint) == [edited]


class SmallContextEmbedder(FakeEmbedder):
    """A fake with a 120-token input (KnowsInputLimit) that records what it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[int] = []

    @property
    def max_input_tokens(self) -> int:
        return 120

    def embed_documents(self, items: Sequence[tuple[str, str]]) -> list[list[float]]:
        self.inputs += [self.count_tokens(self.format_document(t, x)) for t, x in items]
        return super().embed_documents(items)


def test_chunks_fit_the_models_input(store: StoreLike) -> None:
    add(store, "notes", "long.md", long_body("long", 2500), title="A long note")
    small = SmallContextEmbedder()
    report = EmbedIndex(store, store, small, FixedClock()).run()
    assert report.input_limit == 120 and report.chunk_tokens < 120
    assert report.truncated_chunks == 0
    assert small.inputs and max(small.inputs) <= 120  # title and text: nothing cut off
    # the default model (no limit given) keeps the original's 900-token chunks
    plain = EmbedIndex(store, store, FakeEmbedder(model_name="big"), FixedClock()).run()
    assert plain.input_limit is None and plain.chunk_tokens == 900
    assert plain.embedded_chunks < report.embedded_chunks


def test_a_chunk_that_still_cannot_fit_is_reported(store: StoreLike) -> None:
    add(store, "notes", "t.md", "short body", title=" ".join(["word"] * 200))
    report = EmbedIndex(store, store, SmallContextEmbedder(), FixedClock()).run()
    assert report.truncated_chunks == 1


def test_progress_counts_the_characters_behind_for_the_eta(store: StoreLike) -> None:
    """The ETA's unit is characters of text (domain/eta.py): the run announces the total of
    what is pending, and the part behind grows with each batch, the long document's chunks
    each adding their share, until all of it is behind (a failed document counts as behind:
    it is not tried again in this run)."""
    seed(store, docs=4)
    add(store, "notes", "bad.md", "poison pill")
    pending = {m.hash: m.body_length for m in store.documents()}
    events: list[EmbedProgress] = []
    EmbedIndex(store, store, PoisonEmbedder(), FixedClock()).run(
        progress=events.append, batch_docs=2, batch_chunks=2
    )
    assert {e.total_chars for e in events} == {sum(pending.values())}
    behind = [e.done_chars for e in events]
    assert behind == sorted(behind) and len(set(behind)) > len(pending)
    assert behind[-1] == pytest.approx(sum(pending.values()))
