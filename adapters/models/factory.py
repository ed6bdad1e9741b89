"""Build the model adapters the composition root hands to the use cases.

Nothing is loaded here: the adapters resolve and load their GGUF files (or reach their model
servers, for `openai:`/`ollama:` references) on first use, so building them is cheap and never
touches the network.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from adapters.models.bundle import Models
from adapters.models.embed_text import EmbedFamily, EmbedText
from adapters.models.references import (
    ModelResolver,
    is_remote_ref,
    model_cache_dir,
    parse_model_ref,
    select_model_refs,
)
from domain.errors import INVALID_ARGUMENT, QmdError
from domain.ports import Embedder, LlmCache, QueryExpander, Reranker
from domain.usecases.embedding import FingerprintProbes, fingerprint_for, fingerprint_probes
from domain.usecases.status import EmbeddingIdentity


def llama_available() -> bool:
    """Whether llama-cpp-python is installed (checked without importing it)."""
    import importlib.util  # not for `status`, which builds no model adapter

    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


def configured_refs(
    from_yaml: Mapping[str, str], config_dir: str, env: Mapping[str, str]
) -> dict[str, str]:
    """Model reference per role, from index.yml's `models:` (read by the caller), the
    environment and the defaults. A relative path from index.yml is taken relative to the
    file's folder, so the index does not change meaning with the working directory."""
    refs: dict[str, str] = {str(k): v for k, v in select_model_refs(from_yaml, env).items()}
    for role, ref in refs.items():
        came_from_yaml = bool((from_yaml.get(role) or "").strip())
        if is_remote_ref(ref):
            continue
        parsed = parse_model_ref(ref)
        if came_from_yaml and parsed.kind == "path":
            # only for a model file index.yml names: `qmd status` with the default references
            # loads no pathlib (issue 35)
            from pathlib import Path

            path = Path(ref).expanduser()
            refs[role] = str(path if path.is_absolute() else Path(config_dir).resolve() / path)
    return refs


def models_from_config(
    from_yaml: Mapping[str, str],
    config_dir: str,
    env: Mapping[str, str] | None = None,
    *,
    force_cpu: bool = False,
    cache: LlmCache | None = None,
    original_rules: bool = False,
    stop_check: Callable[[], None],
) -> Models:
    """Embedder, reranker and expander for `index.yml` + environment.

    `stop_check` raises WorkCancelledError once the request a call serves is given up; every
    adapter asks it between its steps (REQ-SEARCH-CANCEL-MODEL-001). It has no default: the
    composition root passes the served request's, work outside a server `never_given_up`.

    Without llama-cpp-python the local roles stay empty (the embedding identity is still
    filled in, so `status` counts pending documents) and search runs without those stages;
    remote roles need no llama.cpp.

    `original_rules` (the 2.8.3 compat server): a local reranker without a ranking head falls
    back to the original's constant score instead of being asked for yes/no logits, and a
    local expander's lines are bounded by the token cap alone (REQ-SEARCH-EXPAND-LINE-001).
    """
    # the adapters' modules only here: commands without models never import them
    from adapters.models.llama import (
        EXPAND_LINE_TOKENS,
        LlamaEmbedder,
        LlamaQueryExpander,
        LlamaReranker,
    )
    from adapters.models.remote import RemoteEmbedder, RemoteQueryExpander, RemoteReranker

    environ = os.environ if env is None else env
    refs = configured_refs(from_yaml, config_dir, environ)
    resolver = ModelResolver(model_cache_dir(environ), env=environ)
    local = llama_available()
    embedder: Embedder | None
    if is_remote_ref(refs["embed"]):
        remote = RemoteEmbedder(refs["embed"], env=environ, cache=cache, stop_check=stop_check)
        embedder = remote
        # Without network access: the dimension is declared or cached from an earlier run;
        # if neither, no vector can be current yet, so an unmatchable fingerprint is right.
        space = remote.known_embedding_space()
        fingerprint = fingerprint_for(remote, space) if space is not None else ""
        # a remote model is named as written (REQ-VEC-MODEL-001): no other name is it
        probes: FingerprintProbes | None = None
    else:
        llama = LlamaEmbedder(
            refs["embed"],
            resolver=resolver,
            force_cpu=force_cpu,
            family=_embed_format(environ),
            stop_check=stop_check,
        )
        probes = fingerprint_probes(llama)
        fingerprint = probes.fingerprint(llama.model_name)
        embedder = llama if local else None
    identity = EmbeddingIdentity(
        embedder.model_name if embedder is not None else refs["embed"], fingerprint, probes
    )
    reranker: Reranker | None = None
    expander: QueryExpander | None = None
    if is_off(refs["rerank"]):
        pass  # no reranking stage: search says it skipped it
    elif is_remote_ref(refs["rerank"]):
        reranker = RemoteReranker(refs["rerank"], env=environ, cache=cache, stop_check=stop_check)
    elif local:
        reranker = LlamaReranker(
            refs["rerank"],
            resolver=resolver,
            cache=cache,
            force_cpu=force_cpu,
            original_rules=original_rules,
            stop_check=stop_check,
        )
    max_tokens = _expand_max_tokens(environ)
    if is_off(refs["generate"]):
        pass  # no query expansion
    elif is_remote_ref(refs["generate"]):
        expander = RemoteQueryExpander(
            refs["generate"],
            env=environ,
            cache=cache,
            max_tokens=max_tokens,
            stop_check=stop_check,
        )
    elif local:
        expander = LlamaQueryExpander(
            refs["generate"],
            resolver=resolver,
            cache=cache,
            force_cpu=force_cpu,
            max_tokens=max_tokens,
            stop_check=stop_check,
            # the compat server generates as the original does: only the token cap
            line_tokens=None if original_rules else EXPAND_LINE_TOKENS,
        )
    return Models(
        embedder,
        reranker,
        expander,
        identify=lambda: identity,
        same_model=resolver.names_same_model,
    )


def embedding_identity(
    from_yaml: Mapping[str, str],
    config_dir: str,
    env: Mapping[str, str] | None = None,
    cache: LlmCache | None = None,
) -> EmbeddingIdentity:
    """The configured embedding model's name and fingerprint, as `models_from_config` gives
    them, without building (or importing) a local model adapter: what `qmd status` needs to
    count pending documents. A remote model's fingerprint needs its adapter and the index's
    cache (its declared or cached embedding space), as the embedding run had them."""
    environ = os.environ if env is None else env
    refs = configured_refs(from_yaml, config_dir, environ)
    if is_remote_ref(refs["embed"]):
        from adapters.models.idle import never_given_up  # (and logging): remote models only

        return models_from_config(
            from_yaml, config_dir, environ, cache=cache, stop_check=never_given_up
        ).identity
    text = EmbedText(refs["embed"], _embed_format(environ))
    probes = fingerprint_probes(text)
    return EmbeddingIdentity(refs["embed"], probes.fingerprint(text.model_name), probes)


OFF = "none"


def is_off(ref: str) -> bool:
    """`none` as the reranking or query-expansion model turns that stage off (an image that
    carries only an embedding model, deploy/README.md), instead of fetching the default."""
    return ref.strip().lower() == OFF


def _expand_max_tokens(env: Mapping[str, str]) -> int:
    """`QMD_EXPAND_MAX_TOKENS` bounds query-expansion output (the original's 600 by default):
    on a CPU a small model needs a minute for 600 tokens."""
    try:
        value = int(env.get("QMD_EXPAND_MAX_TOKENS", "600"))
    except ValueError:
        return 600
    return value if value > 0 else 600


_EMBED_FORMATS: dict[str, EmbedFamily] = {
    "embeddinggemma": "embeddinggemma",
    "qwen3": "qwen3",
    "plain": "plain",
}


def _embed_format(env: Mapping[str, str]) -> EmbedFamily | None:
    """`QMD_EMBED_FORMAT` overrides the prompt format guessed from the model name. The original
    2.8.3 formats every non-Qwen model the embeddinggemma way (`title: … | text: …`), MiniLM
    included; `embeddinggemma` reproduces its vectors, e.g. for the model-backed goldens."""
    value = env.get("QMD_EMBED_FORMAT", "").strip().lower()
    if not value:
        return None
    if value not in _EMBED_FORMATS:
        raise QmdError(
            INVALID_ARGUMENT,
            f"QMD_EMBED_FORMAT must be one of {', '.join(_EMBED_FORMATS)}, not {value!r}",
        )
    return _EMBED_FORMATS[value]
