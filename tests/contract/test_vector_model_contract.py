"""Which stored vectors are the configured embedding model's (REQ-VEC-MODEL-001), on every
backend: vectors stored under one path to a model file are current when the model is
configured by another path to the same file, and pending when it names another file; the
stored rows are never rewritten for it."""

from __future__ import annotations

import hashlib
from pathlib import Path

from adapters.models.references import ModelResolver
from domain.usecases.embedding import EmbedIndex, EmbedOptions, fingerprint_probes
from domain.usecases.status import EmbeddingIdentity, StatusReader
from tests.contract.conftest import StoreLike
from tests.fakes import FixedClock
from tests.model_fakes import FakeEmbedder

T0 = "2025-01-01T00:00:00.000Z"


def add(store: StoreLike, collection: str, path: str, body: str) -> str:
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    store.upsert_document(collection, path, path, digest, body, T0, T0)
    return digest


def test_stored_vector_models_names_each_model_once(store: StoreLike) -> None:
    assert store.stored_vector_models() == []
    a = add(store, "c", "a.md", "alpha")
    b = add(store, "c", "b.md", "beta")
    g = add(store, "c", "g.md", "gamma")
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0]), (1, 9, [0.0, 1.0])], "m-two", "f", T0)
    store.store_chunk_vectors(b, [(0, 0, [1.0, 0.0])], "m-one", "f", T0)
    store.store_chunk_vectors(g, [(0, 0, [0.0, 1.0])], "m-two", "other", T0)
    assert sorted(store.stored_vector_models()) == ["m-one", "m-two"]


def test_pending_counts_the_vectors_of_the_pairs_given_as_the_same_model(
    store: StoreLike,
) -> None:
    a = add(store, "c", "a.md", "alpha")
    b = add(store, "c", "b.md", "beta")
    g = add(store, "c", "g.md", "gamma")
    store.store_chunk_vectors(a, [(0, 0, [1.0, 0.0])], "old-name", "f-old", T0)
    store.store_chunk_vectors(b, [(0, 0, [0.0, 1.0])], "new-name", "f-new", T0)
    store.store_chunk_vectors(g, [(0, 0, [1.0, 0.0]), (1, 5, [0.0, 1.0])], "old-name", "f-old", T0)
    assert store.pending_hashes("new-name", "f-new") == [a, g]  # by first path
    also = [("old-name", "f-old")]
    assert store.pending_hashes("new-name", "f-new", also=also) == []
    assert store.pending_count("new-name", "f-new", also=also) == 0
    # the other name with another fingerprint (other formats) is not the same vectors
    assert store.pending_count("new-name", "f-new", also=[("old-name", "f-x")]) == 2
    # the configured pair given again changes nothing
    assert store.pending_count("new-name", "f-new", also=[("new-name", "f-new")]) == 2


def _model_file(path: Path, content: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + content)
    return path


def test_a_model_file_reached_by_another_path_keeps_its_vectors_current(
    store: StoreLike, tmp_path: Path
) -> None:
    folder = tmp_path / "models"
    path_a = _model_file(folder / "all-MiniLM-L6-v2-f16.gguf", b"one model")
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / ".models").symlink_to(folder, target_is_directory=True)
    path_b = tmp_path / "checkout" / ".models" / "all-MiniLM-L6-v2-f16.gguf"
    for name in ("a.md", "b.md", "c.md"):
        add(store, "c", name, f"# {name}\n\nsome text about {name}\n")
    same_model = ModelResolver(cache_dir=tmp_path / "cache").names_same_model

    first = EmbedIndex(store, store, FakeEmbedder(model_name=str(path_a)), FixedClock())
    assert first.run().embedded_documents == 3
    assert store.stored_vector_models() == [str(path_a)]

    def status_pending(model: Path) -> int:
        embedder = FakeEmbedder(model_name=str(model))
        probes = fingerprint_probes(embedder)
        identity = EmbeddingIdentity(str(model), probes.fingerprint(str(model)), probes)
        reader = StatusReader(store, store, lambda: identity, same_model=same_model)
        return reader.status().needs_embedding

    def embed_with(model: Path) -> EmbedIndex:
        options = EmbedOptions(same_model=same_model)
        return EmbedIndex(store, store, FakeEmbedder(model_name=str(model)), FixedClock(), options)

    assert status_pending(path_b) == 0
    again = embed_with(path_b)
    assert again.pending() == []
    report = again.run()
    assert (report.embedded_documents, report.left_pending) == (0, 0)
    assert store.stored_vector_models() == [str(path_a)]  # nothing rewritten
    # without the rule, the other spelling names another model (the original's view)
    plain = EmbedIndex(store, store, FakeEmbedder(model_name=str(path_b)), FixedClock())
    assert len(plain.pending()) == 3

    # another file under the configured name: every document is pending again
    (tmp_path / "checkout" / ".models").unlink()
    _model_file(path_b, b"another model")
    assert status_pending(path_b) == 3
    assert len(embed_with(path_b).pending()) == 3
