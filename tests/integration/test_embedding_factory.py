"""The model factory behind the composition root: references, identity, lazy adapters."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.bootstrap import build_models
from adapters.config.yaml_config import load_config
from adapters.models.factory import configured_refs, llama_available, models_from_config
from adapters.models.idle import never_given_up
from adapters.models.llama import (
    LlamaEmbedder,
    LlamaQueryExpander,
    LlamaReranker,
    gguf_tensor_names,
    has_ranking_head,
)
from adapters.models.references import DEFAULT_MODELS
from domain.errors import QmdError
from domain.usecases.embedding import fingerprint_for

GEMMA = Path(__file__).resolve().parents[2] / ".models" / "gemma-3-270m-q4_k_m.gguf"


def write_config(folder: Path, models: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "index.yml"
    path.write_text(f"collections: {{}}\nmodels:\n{models}", encoding="utf-8")
    return str(path)


def yaml_models(config: str) -> dict[str, str]:
    return load_config(config).models


def test_references_from_yaml_env_and_defaults(tmp_path: Path) -> None:
    config = write_config(tmp_path / "cfg", "  embed: models/e.gguf\n  rerank: ~/r.gguf\n")
    env = {"QMD_RERANK_MODEL": "/env/r.gguf", "QMD_GENERATE_MODEL": "/env/g.gguf"}
    refs = configured_refs(yaml_models(config), str(Path(config).parent), env)
    assert refs["embed"] == str((tmp_path / "cfg" / "models" / "e.gguf").resolve())
    assert refs["rerank"] == str(Path("~/r.gguf").expanduser())
    assert refs["generate"] == "/env/g.gguf"
    assert configured_refs({}, str(tmp_path), {}) == dict(DEFAULT_MODELS)


@pytest.mark.models
def test_models_are_built_lazily_with_the_embedding_identity(tmp_path: Path) -> None:
    config = write_config(tmp_path, "  embed: hf:org/repo/never-downloaded.gguf\n")
    models = models_from_config(
        yaml_models(config),
        str(tmp_path),
        {"XDG_CACHE_HOME": str(tmp_path / "cache")},
        stop_check=never_given_up,
    )
    assert models.identity.model == "hf:org/repo/never-downloaded.gguf"
    assert llama_available()
    assert isinstance(models.embedder, LlamaEmbedder)
    assert isinstance(models.reranker, LlamaReranker)
    assert isinstance(models.expander, LlamaQueryExpander)
    assert models.identity.fingerprint == fingerprint_for(models.embedder)
    assert not (tmp_path / "cache").exists()  # nothing resolved, nothing downloaded


def test_composition_root_finds_the_factory(tmp_path: Path) -> None:
    config = write_config(tmp_path, "")
    models = build_models(config, {"XDG_CACHE_HOME": str(tmp_path)})
    assert models.identity.model == DEFAULT_MODELS["embed"]
    assert models.identity.fingerprint == "c37385"  # the original's, for its default model


@pytest.mark.models  # the llama.cpp adapters are built only where llama_cpp imports
def test_embed_format_override_follows_the_original_for_minilm(tmp_path: Path) -> None:
    config = write_config(tmp_path, "  embed: /models/all-MiniLM-L6-v2-f16.gguf\n")
    guessed = build_models(config, {}).embedder
    assert isinstance(guessed, LlamaEmbedder) and guessed.family == "plain"
    env = {"QMD_EMBED_FORMAT": "embeddinggemma"}
    original = build_models(config, env).embedder
    assert isinstance(original, LlamaEmbedder)
    assert original.format_query("q") == "task: search result | query: q"
    assert original.format_document("T", "body") == "title: T | text: body"
    # the prompt format is part of the fingerprint, so vectors of the two never mix
    assert build_models(config, env).identity != build_models(config, {}).identity
    with pytest.raises(QmdError, match="QMD_EMBED_FORMAT must be one of"):
        build_models(config, {"QMD_EMBED_FORMAT": "nomic"})


def _gguf_with(path: Path, tensors: list[str]) -> Path:
    import gguf  # the `models` extra's, like numpy: a bare install still collects this file
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("gpt2")  # a metadata array of strings, skipped by the reader
    writer.add_token_list(["<s>", "yes", "no"])
    for name in tensors:
        writer.add_tensor(name, np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.models
def test_a_ranking_head_is_a_classifier_tensor(tmp_path: Path) -> None:
    plain = _gguf_with(tmp_path / "lm.gguf", ["token_embd.weight", "output.weight"])
    ranker = _gguf_with(tmp_path / "rank.gguf", ["token_embd.weight", "cls.output.weight"])
    assert gguf_tensor_names(plain) == ["token_embd.weight", "output.weight"]
    assert not has_ranking_head(plain)
    assert has_ranking_head(ranker)
    assert not has_ranking_head(GEMMA)
    (tmp_path / "bad.gguf").write_bytes(b"NOPE")
    with pytest.raises(QmdError, match="not a GGUF file"):
        gguf_tensor_names(tmp_path / "bad.gguf")


@pytest.mark.models
def test_compat_reranker_without_a_ranking_head_scores_like_the_original(tmp_path: Path) -> None:
    gemma = str(GEMMA)
    config = write_config(tmp_path, f"  rerank: {gemma}\n")
    compat = build_models(config, {}, original_rules=True).reranker
    assert compat is not None
    # the original's fallback: 0.5 for every candidate, and the model is never loaded
    assert compat.rerank("query", ["a", "b", "a"]) == [0.5, 0.5, 0.5]
    assert isinstance(compat, LlamaReranker) and not compat._model.loaded


@pytest.mark.models  # the llama.cpp adapters are built only where llama_cpp imports
def test_none_turns_rerank_and_expansion_off(tmp_path: Path) -> None:
    """The container image's switch (deploy/README.md): `none` builds no adapter for that
    role instead of fetching the default model; the embedder is unaffected."""
    env = {"QMD_RERANK_MODEL": "none", "QMD_GENERATE_MODEL": " None "}
    off = models_from_config({}, str(tmp_path), env, stop_check=never_given_up)
    assert off.reranker is None and off.expander is None
    assert isinstance(off.embedder, LlamaEmbedder)
    on = models_from_config({}, str(tmp_path), {}, stop_check=never_given_up)
    assert isinstance(on.reranker, LlamaReranker)
    assert isinstance(on.expander, LlamaQueryExpander)
