"""Idle unloading through the composition root (`keep_models_warm`), with fake resident
models: unloaded after the idle time, never while a call uses it, loaded again on demand."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from adapters.bootstrap import keep_models_warm
from adapters.models.bundle import Models
from adapters.models.idle import IdleUnloader, UseLock
from domain.model import Collection
from domain.usecases.search import SearchRequest
from tests.fakes import InMemoryStore, app_over
from tests.model_fakes import FakeEmbedder, prepared_model


class FakeResident:
    """A model that loads on first use and can be closed, like `_LazyModel`."""

    role = "embed"

    def __init__(self) -> None:
        self.lock = UseLock()
        self.loads = 0
        self.closes = 0
        self._loaded = False

    @property
    def loaded(self) -> bool:
        return self._loaded

    def get(self) -> None:
        if not self._loaded:
            self._loaded = True
            self.loads += 1

    def close(self) -> None:
        assert self.lock._lock._is_owned(), "closed without holding the model's lock"  # type: ignore[attr-defined]
        self._loaded = False
        self.closes += 1


class ResidentEmbedder(FakeEmbedder):
    """Every call holds the model's lock, as the llama.cpp adapters do."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        super().__init__()
        self.resident = FakeResident()
        self.hold = hold
        self.inside = threading.Event()

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        with self.resident.lock:
            self.resident.get()
            self.inside.set()
            if self.hold is not None:
                self.hold.wait(10)
            return super().embed_queries(texts)


def _store() -> InMemoryStore:
    """One document with its vector, so a vector search reaches the embedder."""
    store = InMemoryStore()
    store.put_collection(Collection("notes", "/notes"))
    body = "# Alpha\n\nThe alpha note.\n"
    store.upsert_document("notes", "alpha.md", "Alpha", "a1" * 32, body, "t", "t")
    vector = FakeEmbedder().embed_documents([("Alpha", body)])[0]
    store.store_chunk_vectors("a1" * 32, [(0, 0, vector)], "fake-embed", "", "t")
    return store


def _wait_for(condition: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_models_unload_after_the_idle_time_and_reload_on_demand() -> None:
    embedder = ResidentEmbedder()
    models = Models(embedder=embedder)
    app = app_over(_store(), models)
    unloader = keep_models_warm(app.models, idle_s=0.2)
    try:
        app.searcher.vector_search("alpha", SearchRequest(limit=5))
        resident = embedder.resident
        assert resident.loaded and resident.loads == 1
        assert _wait_for(lambda: not resident.loaded), "not unloaded after the idle time"
        assert resident.closes == 1
        app.searcher.vector_search("alpha", SearchRequest(limit=5))
        assert resident.loaded and resident.loads == 2  # loaded again by the next use
    finally:
        unloader.stop()


def test_a_model_in_use_is_never_unloaded() -> None:
    hold = threading.Event()
    embedder = ResidentEmbedder(hold)
    app = app_over(_store(), Models(embedder=embedder))
    unloader = keep_models_warm(app.models, idle_s=0.05)
    search = threading.Thread(
        target=app.searcher.vector_search, args=("alpha", SearchRequest(limit=5))
    )
    try:
        search.start()
        assert embedder.inside.wait(5)
        time.sleep(0.5)  # ten idle periods pass while the call runs
        assert embedder.resident.loaded and embedder.resident.closes == 0
    finally:
        hold.set()
        search.join(5)
    # the idle time counts from the end of the call, and then it goes
    assert _wait_for(lambda: not embedder.resident.loaded)
    unloader.stop()


def test_zero_keeps_models_loaded() -> None:
    resident = FakeResident()
    resident.get()
    unloader = IdleUnloader([resident], idle_s=0).start()
    assert unloader.sweep() == 0 and resident.loaded
    unloader.stop()


def test_sweep_skips_a_model_whose_lock_is_held() -> None:
    now = [100.0]
    resident = FakeResident()
    resident.lock = UseLock(clock=lambda: now[0])
    resident.get()
    unloader = IdleUnloader([resident], idle_s=10, clock=lambda: now[0])
    now[0] += 60
    holder_in, release = threading.Event(), threading.Event()

    def hold() -> None:
        with resident.lock:
            holder_in.set()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    holder_in.wait(5)
    assert unloader.sweep() == 0 and resident.loaded
    release.set()
    thread.join(5)
    assert unloader.sweep() == 0  # the release was a use: idle starts again from it
    now[0] += 11
    assert unloader.sweep() == 1 and not resident.loaded


@pytest.mark.models
def test_a_real_model_unloads_and_answers_the_same_after_reloading() -> None:
    from adapters.models.llama import LlamaEmbedder

    path = prepared_model("all-MiniLM-L6-v2-f16.gguf")
    embedder = LlamaEmbedder(str(path), force_cpu=True)
    unloader = keep_models_warm(Models(embedder=embedder), idle_s=0.3)
    try:
        first = embedder.embed_queries(["warm service"])[0]
        assert embedder.resident.loaded
        assert _wait_for(lambda: not embedder.resident.loaded), "not unloaded when idle"
        again = embedder.embed_queries(["warm service"])[0]
        assert embedder.resident.loaded
        assert max(abs(a - b) for a, b in zip(first, again, strict=True)) < 1e-5
    finally:
        unloader.stop()
        embedder.close()
