"""The pure parts of the remote model adapters: references, keys, retries' arithmetic, the
answer parsers, batching and the fingerprint. The adapters against a real server are in
tests/contract/test_model_ports.py and tests/e2e/test_remote_models.py."""

from __future__ import annotations

import email.utils
import time
from pathlib import Path

import pytest

from adapters.bootstrap import build_models
from adapters.models.http_json import JsonHttpClient, public_url, retry_after_seconds
from adapters.models.references import is_remote_ref, parse_remote_ref
from adapters.models.remote import (
    RemoteEmbedder,
    RemoteQueryExpander,
    RemoteReranker,
    base_url_for,
    parse_expansion_answer,
    read_api_key,
    remote_embed_family,
    split_batches,
    yes_probability,
)
from domain.errors import INVALID_ARGUMENT, MODEL_UNAVAILABLE, QmdError
from domain.model import SubQuery
from domain.usecases.embedding import embed_fingerprint, fingerprint_for
from tests.fakes import InMemoryStore

# ------------------------------------------------------------------ references


def test_openai_reference_with_base_url_and_options() -> None:
    ref = parse_remote_ref(
        "openai:text-embedding-3-small@https://api.example.com/v1/?dimensions=512"
    )
    assert (ref.provider, ref.model, ref.base_url) == (
        "openai",
        "text-embedding-3-small",
        "https://api.example.com/v1",
    )
    assert ref.option("dimensions") == "512"
    # Stored without the address; options that change results stay in the name.
    assert ref.identity == "openai:text-embedding-3-small?dimensions=512"


def test_reference_without_url_takes_the_environment_or_default() -> None:
    ref = parse_remote_ref("openai:nomic-embed-text")
    assert ref.base_url == "" and ref.identity == "openai:nomic-embed-text"
    assert base_url_for(ref, {}) == "https://api.openai.com/v1"
    assert base_url_for(ref, {"QMD_OPENAI_BASE_URL": "http://gpu:8000/v1/"}) == "http://gpu:8000/v1"
    ollama = parse_remote_ref("ollama:nomic-embed-text")
    assert base_url_for(ollama, {}) == "http://127.0.0.1:11434"
    assert base_url_for(ollama, {"OLLAMA_HOST": "gpu:11434"}) == "http://gpu:11434"


def test_model_ids_may_contain_slashes_colons_and_at_signs() -> None:
    ref = parse_remote_ref("ollama:library/qwen3:0.6b@http://box:11434")
    assert (ref.model, ref.base_url) == ("library/qwen3:0.6b", "http://box:11434")
    assert parse_remote_ref("openai:org/model@v2").model == "org/model@v2"


@pytest.mark.parametrize(
    "text",
    [
        "openai:m@https://user:sk-secret@api.example.com/v1",
        "openai:m?api_key=sk-secret",
        "openai:m?key=sk-secret",
    ],
)
def test_references_never_carry_keys(text: str) -> None:
    with pytest.raises(QmdError) as caught:
        parse_remote_ref(text)
    assert caught.value.code == INVALID_ARGUMENT
    assert "sk-secret" not in caught.value.message
    assert "QMD_<ROLE>_API_KEY" in caught.value.message


def test_bad_references_are_refused_clearly() -> None:
    for text, words in (
        ("openai:", "must name a model"),
        ("openai:m?colour=red", "unknown option 'colour'"),
    ):
        with pytest.raises(QmdError, match=words):
            parse_remote_ref(text)
    assert is_remote_ref("openai:m") and is_remote_ref(" ollama:m")
    assert not is_remote_ref("hf:org/repo/file.gguf") and not is_remote_ref("/models/x.gguf")


def test_keys_come_from_variables_or_key_files_in_order(tmp_path: Path) -> None:
    ref = parse_remote_ref("openai:m")
    assert read_api_key(ref, "embed", {}) == (None, "")
    env = {"OPENAI_API_KEY": "provider", "QMD_OPENAI_API_KEY": "qmd-provider"}
    assert read_api_key(ref, "embed", env) == ("qmd-provider", "QMD_OPENAI_API_KEY")
    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    env["QMD_EMBED_API_KEY_FILE"] = str(key_file)
    assert read_api_key(ref, "embed", env) == ("from-file", "QMD_EMBED_API_KEY_FILE")
    named = parse_remote_ref("openai:m?key_env=MY_KEY")
    assert read_api_key(named, "embed", {**env, "MY_KEY": "mine"}) == ("mine", "MY_KEY")
    env["QMD_EMBED_API_KEY_FILE"] = str(tmp_path / "missing")
    with pytest.raises(QmdError) as caught:
        read_api_key(ref, "embed", env)
    assert caught.value.code == MODEL_UNAVAILABLE


# ------------------------------------------------------------------ HTTP plumbing


def test_retry_after_as_seconds_or_http_date() -> None:
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_seconds(date, now=now) == pytest.approx(30, abs=1.5)


def test_urls_and_messages_are_shown_without_secrets() -> None:
    assert public_url("https://u:p@host:8443/v1?token=x#f") == "https://host:8443/v1"
    client = JsonHttpClient(
        "http://127.0.0.1:9/v1",
        describe=lambda reason: QmdError(MODEL_UNAVAILABLE, reason),
        api_key="abc123secretvalue",
    )
    echoed = "Incorrect API key provided: abc123secretvalue (also sk-proj-abcdefgh12345)"
    redacted = client.redact(echoed)
    assert "abc123secretvalue" not in redacted and "sk-proj-abcdefgh12345" not in redacted
    assert repr(client).count("abc123secretvalue") == 0


# ------------------------------------------------------------------ answers


def test_yes_probability_from_top_logprobs() -> None:
    logprobs = {
        "content": [
            {
                "token": "yes",
                "top_logprobs": [
                    {"token": "yes", "logprob": -0.1},
                    {"token": " No", "logprob": -2.5},
                    {"token": "maybe", "logprob": -3.0},
                ],
            }
        ]
    }
    import math

    yes, no = math.exp(-0.1), math.exp(-2.5)
    assert yes_probability(logprobs, "yes") == pytest.approx(yes / (yes + no))
    assert yes_probability(None, "Yes.") == 1.0
    assert yes_probability(None, "no") == 0.0
    assert yes_probability({"content": []}, "\n") == 0.5


def test_expansion_answers_in_json_or_lines() -> None:
    want = [SubQuery("lex", "rate limit"), SubQuery("vec", "how are requests throttled")]
    as_json = '{"queries": [{"type": "lex", "query": "rate limit"}, ' + (
        '{"type": "VEC", "query": "how are  requests\\nthrottled"}, {"type": "x", "query": "y"}]}'
    )
    assert parse_expansion_answer(as_json) == want
    assert parse_expansion_answer("```json\n" + as_json + "\n```") == want
    assert parse_expansion_answer("lex: rate limit\nvec: how are requests throttled\n") == want
    assert parse_expansion_answer("[]") == []
    assert parse_expansion_answer("no idea") == []


def test_batches_respect_count_and_token_budget() -> None:
    texts = ["a" * 30] * 5 + ["b" * 3000] + ["c"]
    batches = split_batches(texts, max_inputs=2, max_tokens=100)
    assert [len(b) for b in batches] == [2, 2, 1, 1, 1]
    assert [t for b in batches for t in b] == texts  # order kept, nothing dropped


def test_prompt_format_by_model_name_or_option() -> None:
    assert remote_embed_family(parse_remote_ref("openai:embeddinggemma-300m")) == "embeddinggemma"
    assert remote_embed_family(parse_remote_ref("ollama:qwen3-embedding:0.6b")) == "qwen3"
    assert remote_embed_family(parse_remote_ref("openai:text-embedding-3-small")) == "plain"
    assert remote_embed_family(parse_remote_ref("openai:x?format=embeddinggemma")) == (
        "embeddinggemma"
    )


# ------------------------------------------------------------------ identity and factory


def test_fingerprint_includes_served_model_and_dimension() -> None:
    local = embed_fingerprint("m", "q", "d")
    assert embed_fingerprint("m", "q", "d", None) == local  # local fingerprints unchanged
    a = embed_fingerprint("m", "q", "d", "openai:m dimensions=384")
    assert a != local
    assert a != embed_fingerprint("m", "q", "d", "openai:m dimensions=768")
    assert a != embed_fingerprint("m", "q", "d", "openai:other dimensions=384")


def test_factory_builds_remote_adapters_without_touching_the_network(tmp_path: Path) -> None:
    config = tmp_path / "index.yml"
    config.write_text(
        "models:\n"
        "  embed: openai:minilm@http://127.0.0.1:9/v1?dimensions=384\n"
        "  rerank: ollama:qwen3-reranker@http://127.0.0.1:9\n"
        "  generate: openai:qwen3@http://127.0.0.1:9/v1\n"
    )
    cache = InMemoryStore()  # it is also the LlmCache
    models = build_models(str(config), {}, cache=cache)  # port 9: nothing listens
    assert isinstance(models.embedder, RemoteEmbedder)
    assert isinstance(models.reranker, RemoteReranker)
    assert isinstance(models.expander, RemoteQueryExpander)
    assert models.identity.model == "openai:minilm?dimensions=384"
    assert models.identity.fingerprint == fingerprint_for(
        models.embedder, "openai:minilm dimensions=384"
    )
    undeclared = tmp_path / "undeclared.yml"
    undeclared.write_text("models:\n  embed: openai:minilm@http://127.0.0.1:9/v1\n")
    # Never embedded (no dimension known): no vector can be current.
    assert build_models(str(undeclared), {}, cache=cache).identity.fingerprint == ""
