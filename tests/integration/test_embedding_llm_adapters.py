"""llama adapter logic that needs no model: prompt formats, parsing, fallbacks, cache keys.

A reference to a file that does not exist proves a code path never loads a model: touching the
model would raise `model-unavailable`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.models.llama import (
    LlamaEmbedder,
    LlamaQueryExpander,
    LlamaReranker,
    chat_prompt,
    detect_family,
    filter_expansions,
    llm_cache_key,
    parse_expansion,
    rerank_prompt_parts,
    use_gpu,
)
from adapters.models.references import (
    DEFAULT_MODELS,
    PREPARED_DIR_NAME,
    PREPARED_GENERATE_FILE,
    ModelResolver,
)
from domain.errors import MODEL_UNAVAILABLE, QmdError
from domain.model import SubQuery
from tests.fakes import InMemoryStore
from tests.model_fakes import REPO_ROOT, prepared_model

MISSING = "/nonexistent/model.gguf"


def test_cache_keys_match_the_original() -> None:
    # Computed with @tobilu/qmd 2.8.3's getCacheKey for the same inputs.
    expand = llm_cache_key(
        "expandQuery", {"query": "rate limiter", "model": DEFAULT_MODELS["generate"]}
    )
    assert expand == "a1c692ef5a92a3f1eb49dd7bab770f4f83c2b6478476570d66413b7493601236"
    rerank = llm_cache_key(
        "rerank", {"query": "cats\n\nsleep", "model": "m", "chunk": "Cats sleep — a lot. 猫"}
    )
    assert rerank == "de06949ac22d99815af31bb416ba17b40e299781770442183fdada9beba546b1"


@pytest.mark.parametrize(
    ("reference", "family"),
    [
        (DEFAULT_MODELS["embed"], "embeddinggemma"),
        ("hf:Qwen/Qwen3-Embedding-0.6B-GGUF/Qwen3-Embedding-0.6B-Q8_0.gguf", "qwen3"),
        ("/models/embed-QWEN.gguf", "qwen3"),
        (".models/all-MiniLM-L6-v2-f16.gguf", "plain"),
        ("/models/bge-small-en-v1.5.gguf", "plain"),
        ("/models/something-else.gguf", "embeddinggemma"),
    ],
)
def test_embed_family_from_reference(reference: str, family: str) -> None:
    assert detect_family(reference) == family


def test_embedding_text_formats() -> None:
    gemma = LlamaEmbedder(DEFAULT_MODELS["embed"])
    assert gemma.format_query("cats") == "task: search result | query: cats"
    assert gemma.format_document("", "body") == "title: none | text: body"
    assert gemma.format_document("T", "body") == "title: T | text: body"
    qwen = LlamaEmbedder("hf:Qwen/Qwen3-Embedding-0.6B-GGUF/Qwen3-Embedding-0.6B-Q8_0.gguf")
    assert qwen.format_query("cats") == (
        "Instruct: Retrieve relevant documents for the given query\nQuery: cats"
    )
    assert qwen.format_document("T", "body") == "T\nbody"
    assert qwen.format_document("", "body") == "body"
    plain = LlamaEmbedder("all-MiniLM-L6-v2.gguf")
    assert plain.format_query("cats") == "cats"
    assert plain.format_document("T", "body") == "T\nbody"


def test_missing_model_fails_on_first_use_not_on_construction() -> None:
    resolver = ModelResolver(allow_download=False)
    embedder = LlamaEmbedder(MISSING, resolver=resolver)
    assert embedder.model_name == MISSING
    with pytest.raises(QmdError) as raised:
        embedder.embed_queries(["x"])
    assert raised.value.code == MODEL_UNAVAILABLE
    assert embedder.embed_queries([]) == []  # nothing to do, nothing loaded


def test_rerank_prompt_is_qwen3_reranker_layout() -> None:
    before, after = rerank_prompt_parts("cats")
    assert before.startswith("<|im_start|>system\nJudge whether the Document meets")
    assert before.endswith("<Query>: cats\n<Document>: ")
    assert after == "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def test_chat_prompt_follows_the_template_family() -> None:
    assert chat_prompt("{{ '<|im_start|>' }}", "q").startswith("<|im_start|>user\nq<|im_end|>")
    assert chat_prompt("<start_of_turn>", "q").endswith("<start_of_turn>model\n")
    assert chat_prompt("", "q") == "q\n"


def test_parse_and_filter_expansion_lines() -> None:
    text = "lex: cats sleep\nvec: how long cats sleep\nhyde: Cats nap.\nnote: x\nlex:\nbad line\n"
    items = parse_expansion(text)
    assert items == [
        SubQuery("lex", "cats sleep"),
        SubQuery("vec", "how long cats sleep"),
        SubQuery("hyde", "Cats nap."),
    ]
    assert filter_expansions("Cat's SLEEP?", items) == items
    assert filter_expansions("sleep", items) == items[:2]
    assert filter_expansions("dogs", items) == []
    assert filter_expansions("日本語", items) == items  # no ASCII terms: keep everything


def test_cached_expansion_is_served_without_loading_the_model() -> None:
    cache = InMemoryStore()
    expander = LlamaQueryExpander(
        MISSING, cache=cache, resolver=ModelResolver(allow_download=False)
    )
    key = llm_cache_key("expandQuery", {"query": "cats", "model": MISSING})
    assert expander.cache_key("cats") == key
    cache.put(key, '[{"type":"lex","query":"cats sleep"},{"type":"hyde","query":"Cats nap"}]')
    assert expander.expand("cats") == [SubQuery("lex", "cats sleep"), SubQuery("hyde", "Cats nap")]
    cache.put(key, '[{"type":"vec","text":"older entry"}]')  # the original's legacy shape
    assert expander.expand("cats") == [SubQuery("vec", "older entry")]
    cache.put(key, "not json")
    with pytest.raises(QmdError) as raised:  # unusable entry: regenerate, model is missing
        expander.expand("cats")
    assert raised.value.code == MODEL_UNAVAILABLE


def test_cached_rerank_scores_are_served_without_loading_the_model() -> None:
    cache = InMemoryStore()
    reranker = LlamaReranker(MISSING, cache=cache, resolver=ModelResolver(allow_download=False))
    for chunk, score in [("a", "0.25"), ("b", "0.75")]:
        cache.put(llm_cache_key("rerank", {"query": "q", "model": MISSING, "chunk": chunk}), score)
    assert reranker.rerank("q", ["b", "a", "b"]) == [0.75, 0.25, 0.75]
    with pytest.raises(QmdError):
        reranker.rerank("q", ["a", "uncached"])


def test_cpu_can_be_forced() -> None:
    assert use_gpu(force_cpu=True) is False
    assert use_gpu(env={"QMD_FORCE_CPU": "1"}) is False
    assert use_gpu(env={"QMD_LLAMA_GPU": "false"}) is False


# ------------------------------------------------------------------------------ real model


@pytest.mark.models  # loads llama_cpp
@pytest.mark.parametrize(("given", "seen"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_openmp_threads_wait_passively_unless_told_otherwise(given: str | None, seen: str) -> None:
    # Busy-waiting OpenMP threads made a query embedding 90x slower beside another llama.cpp
    # process (benchmarks/bench_threads.py); libgomp reads the policy when llama_cpp loads.
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    probe = (
        "import os, sys\n"
        "from adapters.models.llama import import_llama_cpp\n"
        "assert 'llama_cpp' not in sys.modules\n"
        "import_llama_cpp()\n"
        "print(os.environ['OMP_WAIT_POLICY'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == seen


@pytest.mark.models
def test_real_expansion_and_scores_are_cached_under_the_original_keys(tmp_path: Path) -> None:
    """The original's key shapes, the model named by the file it is (REQ-INDEX-LLMCACHE-002):
    a second adapter on the same file, reached by another spelling of its path, is answered
    from the cache without loading the model."""
    path = prepared_model(PREPARED_GENERATE_FILE)
    reference = f"{PREPARED_DIR_NAME}/{path.name}"  # relative: resolves only under REPO_ROOT
    cache = InMemoryStore()
    present = ModelResolver(base_dir=REPO_ROOT, allow_download=False)
    (tmp_path / "linked").symlink_to(path.parent, target_is_directory=True)
    elsewhere = ModelResolver(base_dir=tmp_path, allow_download=False)
    linked = f"linked/{path.name}"
    identity = present.cache_identity(reference)
    assert identity.startswith(f"{path.resolve()}#size=")
    assert elsewhere.cache_identity(linked) == identity

    expander = LlamaQueryExpander(
        reference, cache=cache, resolver=present, context_size=512, max_tokens=24
    )
    items = expander.expand("sqlite vector search")
    expander.close()
    raw = cache.get(
        llm_cache_key("expandQuery", {"query": "sqlite vector search", "model": identity})
    )
    assert raw is not None
    assert json.loads(raw) == [{"type": s.type, "query": s.query} for s in items]
    again = LlamaQueryExpander(linked, cache=cache, resolver=elsewhere)
    assert again.expand("sqlite vector search") == items
    assert not again.resident.loaded  # no model needed the second time

    reranker = LlamaReranker(reference, cache=cache, resolver=present, context_size=1024)
    scores = reranker.rerank("cats", ["Cats sleep a lot.", "Taxes are due."])
    reranker.close()
    for chunk, score in zip(["Cats sleep a lot.", "Taxes are due."], scores, strict=True):
        stored = cache.get(
            llm_cache_key("rerank", {"query": "cats", "model": identity, "chunk": chunk})
        )
        assert stored is not None and float(stored) == score
    rescored = LlamaReranker(linked, cache=cache, resolver=elsewhere)
    assert rescored.rerank("cats", ["Taxes are due.", "Cats sleep a lot."]) == list(
        reversed(scores)
    )
    assert not rescored.resident.loaded and rescored.evaluated_tokens == 0
