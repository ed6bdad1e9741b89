"""The model factory behind the composition root: references, identity, lazy adapters."""

from __future__ import annotations

from pathlib import Path

from adapters.bootstrap import build_models
from adapters.config.yaml_config import load_config
from adapters.models.factory import configured_refs, llama_available, models_from_config
from adapters.models.llama import LlamaEmbedder, LlamaQueryExpander, LlamaReranker
from adapters.models.references import DEFAULT_MODELS
from domain.usecases.embedding import fingerprint_for


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


def test_models_are_built_lazily_with_the_embedding_identity(tmp_path: Path) -> None:
    config = write_config(tmp_path, "  embed: hf:org/repo/never-downloaded.gguf\n")
    models = models_from_config(
        yaml_models(config), str(tmp_path), {"XDG_CACHE_HOME": str(tmp_path / "cache")}
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
