"""LlmCache contract: the fake, SQLite and PostgreSQL keep and forget entries alike, keep
them across indexing runs (REQ-INDEX-LLMCACHE-001), and answer a model file reached by another
spelling of its path (REQ-INDEX-LLMCACHE-002)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.app import App
from adapters.fs.claude_sessions import ClaudeCodeSessions, VaultFolder
from adapters.fs.content_source import FileSystemSource
from adapters.models.llama import LlamaQueryExpander, LlamaReranker
from adapters.models.references import ModelResolver
from domain.model import SubQuery
from domain.sessions import Transcript
from domain.usecases.sessions import SessionMemory, SessionStores
from tests.contract.conftest import StoreLike
from tests.fakes import (
    FixedClock,
    InMemoryChunkIndex,
    InMemoryConfigRepository,
    InMemorySessions,
    InMemoryStore,
)
from tests.projmem_fixtures import install_sessions


def test_get_put_clear(store: StoreLike) -> None:
    assert store.get("k") is None
    store.put("k", '{"a": 1}')
    store.put("k2", "日本")
    assert store.get("k") == '{"a": 1}'
    assert store.get("k2") == "日本"
    store.put("k", "replaced")
    assert store.get("k") == "replaced"
    store.clear()
    assert store.get("k") is None
    assert store.get("k2") is None


def _app(store: StoreLike) -> App:
    """The composition root over `store` (every storage port), reading real folders."""
    return App(
        store=store,
        lexical=store,
        vectors=store,
        cache=store,
        config=InMemoryConfigRepository(),
        source=FileSystemSource(),
        clock=FixedClock(),
        maintenance=store,
        metadata_index=store,
    )


def test_indexing_and_summary_writes_keep_the_cache(store: StoreLike, tmp_path: Path) -> None:
    """REQ-INDEX-LLMCACHE-001: `collection add`, `update` and a projmem summary write (which
    indexes the session vault) keep every entry; a changed model misses its entries because
    the key names the model, so nothing needs emptying."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Alpha\n\nalpha beta\n", encoding="utf-8")
    expander = LlamaQueryExpander(
        "model-a", cache=store, resolver=ModelResolver(allow_download=False)
    )
    cached = '[{"type":"lex","query":"alpha notes"},{"type":"vec","query":"alpha explained"}]'
    store.put(expander.cache_key("alpha"), cached)
    store.put("rerank-entry", "0.5")
    app = _app(store)
    app.collections.add(str(notes), "notes")
    (notes / "a.md").write_text("# Alpha\n\nalpha beta gamma\n", encoding="utf-8")
    (notes / "b.md").write_text("# Beta\n\nbeta\n", encoding="utf-8")
    app.collections.update()
    transcript = InMemorySessions(_transcripts(tmp_path))
    summaries = InMemoryChunkIndex(InMemoryStore())
    vault = VaultFolder(str(tmp_path / "vault"))
    memory = SessionMemory(
        SessionStores(transcript, summaries, vault), app.collections, FixedClock()
    )
    session_id = transcript.list_sessions()[0].session_id
    lists: dict[str, Any] = {"decisions": [], "outcomes": [], "openItems": [], "tags": []}
    memory.summarize(session_id, {"overview": "First.", **lists})  # adds the vault
    memory.summarize(session_id, {"overview": "Second.", **lists})  # indexes it again
    assert app.store.get_collection("sessions") is not None
    assert store.get("rerank-entry") == "0.5"
    # served from the cache: the model is not even on disk
    assert expander.expand("alpha") == [
        SubQuery("lex", "alpha notes"),
        SubQuery("vec", "alpha explained"),
    ]
    other = LlamaQueryExpander("model-b", cache=store, resolver=ModelResolver(allow_download=False))
    assert store.get(other.cache_key("alpha")) is None  # another model: another key


def _transcripts(tmp_path: Path) -> list[Transcript]:
    root = install_sessions(tmp_path / "projects")
    disk = ClaudeCodeSessions(str(root))
    found = [disk.read_session(ref.session_id) for ref in disk.list_sessions()]
    return [t for t in found if t is not None]


def test_another_spelling_of_the_model_file_reads_its_entries(
    store: StoreLike, tmp_path: Path
) -> None:
    """REQ-INDEX-LLMCACHE-002: what one checkout cached (expansions, rerank scores) answers
    another whose `.models` links to the same folder, after an update with no change, without
    loading the model (the file here is no model at all: loading it would fail); a file
    replaced in place is another model and misses them. Found by the benchmark: two
    worktrees' runs of one question re-ran the reranker on the same 30 chunks."""
    models = tmp_path / "models"
    models.mkdir()
    model = models / "ranker.gguf"
    model.write_bytes(b"GGUF not a model")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".models").symlink_to(models, target_is_directory=True)
    offline = ModelResolver(allow_download=False, base_dir=checkout)
    first_expander = LlamaQueryExpander(str(model), cache=store, resolver=offline)
    first_reranker = LlamaReranker(str(model), cache=store, resolver=offline)
    # what a first run wrote, under its adapters' own keys
    store.put(first_expander.cache_key("alpha"), '[{"type":"lex","query":"alpha notes"}]')
    store.put(first_reranker.cache_key("alpha", "chunk one"), "0.25")
    store.put(first_reranker.cache_key("alpha", "chunk two"), "0.75")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Alpha\n\nalpha beta\n", encoding="utf-8")
    app = _app(store)
    app.collections.add(str(notes), "notes")
    app.collections.update()  # nothing changed

    for spelling in (str(checkout / ".models" / "ranker.gguf"), ".models/ranker.gguf"):
        expander = LlamaQueryExpander(spelling, cache=store, resolver=offline)
        reranker = LlamaReranker(spelling, cache=store, resolver=offline)
        assert expander.expand("alpha") == [SubQuery("lex", "alpha notes")]
        assert reranker.rerank("alpha", ["chunk two", "chunk one"]) == [0.75, 0.25]
        assert not reranker.resident.loaded and reranker.evaluated_tokens == 0
        assert not expander.resident.loaded

    model.write_bytes(b"GGUF another model, same name")
    replaced = LlamaReranker(str(model), cache=store, resolver=offline)
    assert replaced.cache_key("alpha", "chunk one") != first_reranker.cache_key(
        "alpha", "chunk one"
    )
