"""A question asked again reranks nothing (REQ-INDEX-LLMCACHE-001, REQ-INDEX-LLMCACHE-002):
the real reranker adapter (gemma-3-270m) through the composition root, on SQLite and
PostgreSQL: asked twice, after a `qmd update` with no change, and from another checkout whose
`.models` links to the same model folder (how the benchmarks' kept indexes were shared by
worktrees: there the second run scored the same 30 chunks again)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from adapters.app import App
from adapters.bootstrap import build_app
from adapters.models.llama import LlamaReranker
from adapters.models.references import PREPARED_EMBED_FILE, PREPARED_GENERATE_FILE, ModelResolver
from domain.model import SubQuery
from domain.ports import WorkCancelledError
from domain.usecases.search import SearchRequest
from tests.fakes import InMemoryStore
from tests.model_fakes import prepared_model
from tests.postgres_server import drop_schema, fresh_schema_url

NOTES = {
    "cats.md": "# Cats\n\nCats sleep most of the day and hunt at dusk.\n",
    "dogs.md": "# Dogs\n\nDogs sleep less than cats and like long walks.\n",
    "sleep.md": "# Sleep\n\nHow animals sleep: cats, dogs and birds compared.\n",
}


@contextmanager
def _index_url(backend: str) -> Iterator[str | None]:
    if backend == "sqlite":
        yield None  # the file under XDG_CACHE_HOME
        return
    url, schema = fresh_schema_url()
    try:
        yield url
    finally:
        drop_schema(schema)


@pytest.mark.models
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_question_asked_again_reranks_nothing(backend: str, tmp_path: Path) -> None:
    ranker = prepared_model(PREPARED_GENERATE_FILE)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".models").symlink_to(ranker.parent, target_is_directory=True)
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    searches = [SubQuery("lex", "cats sleep")]
    request = SearchRequest(limit=3, collections=["notes"], rerank=True)

    with _index_url(backend) as url:

        def app_with(rerank_model: Path) -> App:
            env = {
                "HOME": str(tmp_path / "home"),
                "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "QMD_OFFLINE": "1",
                "QMD_EMBED_MODEL": str(prepared_model(PREPARED_EMBED_FILE)),
                "QMD_RERANK_MODEL": str(rerank_model),
                "QMD_GENERATE_MODEL": "none",
            }
            return build_app(None, env, index_url=url)

        first = app_with(ranker)
        try:
            first.collections.add(str(notes), "notes")
            reranker = first.models.reranker
            assert isinstance(reranker, LlamaReranker)
            asked = first.searcher.structured_query(searches, request)
            scored = reranker.evaluated_tokens
            assert len(asked) == 3 and scored > 0
            assert first.searcher.structured_query(searches, request) == asked
            first.collections.update()  # no content change
            assert first.searcher.structured_query(searches, request) == asked
            assert reranker.evaluated_tokens == scored  # nothing scored again
        finally:
            first.close()

        # another checkout: its `.models` is a link to the same folder
        second = app_with(checkout / ".models" / ranker.name)
        try:
            again = second.searcher.structured_query(searches, request)
            reranker = second.models.reranker
            assert isinstance(reranker, LlamaReranker)
            assert [(r.document.meta.path, r.score) for r in again] == [
                (r.document.meta.path, r.score) for r in asked
            ]
            assert reranker.evaluated_tokens == 0
            assert not reranker.resident.loaded
        finally:
            second.close()


@pytest.mark.models
def test_a_rerank_cut_short_keeps_the_scores_it_made(tmp_path: Path) -> None:
    """A rerank given up between documents (the request's time ran out: the stop check
    raises) has cached the scores it made, so the same question asked again scores only the
    rest."""
    ranker = prepared_model(PREPARED_GENERATE_FILE)
    cache = InMemoryStore()
    chunks = list(NOTES.values())
    checks = 0

    def out_of_time_after_two() -> None:
        nonlocal checks
        checks += 1
        if checks > 2:
            raise WorkCancelledError("the request was given up")

    offline = ModelResolver(allow_download=False)
    cut = LlamaReranker(
        str(ranker), cache=cache, resolver=offline, stop_check=out_of_time_after_two
    )
    with pytest.raises(WorkCancelledError):
        cut.rerank("cats sleep", chunks)
    cut.close()
    scored = [cache.get(cut.cache_key("cats sleep", chunk)) is not None for chunk in chunks]
    assert scored.count(True) >= 1 and not all(scored)

    whole = LlamaReranker(str(ranker), cache=cache, resolver=offline)
    scores = whole.rerank("cats sleep", chunks)
    whole.close()
    alone = LlamaReranker(str(ranker), cache=InMemoryStore(), resolver=offline)
    assert scores == alone.rerank("cats sleep", chunks)
    alone.close()
    assert 0 < whole.evaluated_tokens < alone.evaluated_tokens
