"""Embedder, Reranker and QueryExpander over model servers (ADR 0013).

Two API families:

* OpenAI-compatible (`openai:`): `/embeddings`, `/chat/completions`, `/rerank` (the
  Cohere/Jina/llama.cpp-server shape) and `/models` under the base URL; served by OpenAI,
  vLLM, LM Studio, llama.cpp's `llama-server`, llama-cpp-python's `llama_cpp.server`, Ollama's
  `/v1` and most hosted APIs.
* Ollama's native API (`ollama:`): `/api/embed`, `/api/chat` (with a JSON-schema `format`) and
  `/api/tags`; reranking goes through Ollama's OpenAI-compatible `/v1/chat/completions`.

Every failure is `model-unavailable` with the URL (without secrets) and the reason, so search
degrades exactly as when a local model file is missing. Reranking and expansion results are
cached in `llm_cache` under the same keys as the local adapters'.
"""

from __future__ import annotations

import contextvars
import json
import math
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from adapters.models.embed_text import QWEN_EMBED_INSTRUCTION, EmbedFamily
from adapters.models.http_json import RETRYABLE_STATUS, HttpStatusError, JsonHttpClient
from adapters.models.idle import never_given_up
from adapters.models.llama import (
    RERANK_INSTRUCTION,
    RERANK_SYSTEM,
    cached_rerank_score,
    error_expansion,
    fallback_expansion,
    filter_expansions,
    llm_cache_key,
    parse_expansion,
    store_rerank_score,
)
from adapters.models.references import (
    DEFAULT_OLLAMA_BASE_URL,
    DEFAULT_OPENAI_BASE_URL,
    RemoteModelRef,
    parse_remote_ref,
)
from adapters.outbound import strict_json
from domain.errors import INVALID_ARGUMENT, MODEL_UNAVAILABLE, QmdError
from domain.model import SubQuery, SubQueryType
from domain.ports import LlmCache

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_BATCH_INPUTS = 32
DEFAULT_BATCH_TOKENS = 8192  # estimated tokens per embeddings request
DEFAULT_CONCURRENCY = 4
DEFAULT_RETRIES = 4
RERANK_DOC_CHARS = 12_000  # a chat reranker sees at most this much of a document
ESTIMATED_CHARS_PER_TOKEN = 3  # over-counts English (about 4), so chunks stay under budget

ROLE_KEY_VARS = {
    "embed": "QMD_EMBED_API_KEY",
    "rerank": "QMD_RERANK_API_KEY",
    "generate": "QMD_GENERATE_API_KEY",
}
PROVIDER_KEY_VARS = {
    "openai": ("QMD_OPENAI_API_KEY", "OPENAI_API_KEY"),
    "ollama": ("QMD_OLLAMA_API_KEY",),
}

EXPAND_INSTRUCTION = (
    "/no_think Expand this search query: {query}\n"
    "Give a few alternative searches: `lex` are keyword queries, `vec` natural-language "
    "questions, `hyde` a one-sentence passage that would answer it. Every one must repeat "
    "a word of the query."
)
EXPAND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["lex", "vec", "hyde"]},
                    "query": {"type": "string"},
                },
                "required": ["type", "query"],
            },
        }
    },
    "required": ["queries"],
}
_EXPAND_TYPES: dict[str, SubQueryType] = {"lex": "lex", "vec": "vec", "hyde": "hyde"}
_GEMMA_EMBED = re.compile(r"embeddinggemma|embedding-gemma", re.IGNORECASE)
_QWEN_EMBED = re.compile(r"qwen.*embed|embed.*qwen", re.IGNORECASE)


# ---------------------------------------------------------------------------- configuration


def read_api_key(ref: RemoteModelRef, role: str, env: Mapping[str, str]) -> tuple[str | None, str]:
    """(key, where it came from): `?key_env=NAME`, then `QMD_<ROLE>_API_KEY[_FILE]`, then
    the provider's variables (`QMD_OPENAI_API_KEY[_FILE]`, `OPENAI_API_KEY`). Keys are never
    taken from the reference itself."""
    names: list[str] = []
    if ref.option("key_env"):
        names.append(ref.option("key_env"))
    if role in ROLE_KEY_VARS:
        names.append(ROLE_KEY_VARS[role])
    names.extend(PROVIDER_KEY_VARS[ref.provider])
    for name in names:
        value = (env.get(name) or "").strip()
        if value:
            return value, name
        path = (env.get(f"{name}_FILE") or "").strip()
        if path:
            try:
                key = Path(path).expanduser().read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise QmdError(
                    MODEL_UNAVAILABLE,
                    f"The {role} model {ref.text!r}: cannot read the key file named by "
                    f"{name}_FILE ({exc.__class__.__name__})",
                ) from exc
            if key:
                return key, f"{name}_FILE"
    return None, ""


def base_url_for(ref: RemoteModelRef, env: Mapping[str, str]) -> str:
    if ref.base_url:
        return ref.base_url
    if ref.provider == "openai":
        return (env.get("QMD_OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL).rstrip("/")
    host = (env.get("OLLAMA_HOST") or DEFAULT_OLLAMA_BASE_URL).strip().rstrip("/")
    return host if "://" in host else f"http://{host}"


def _option_number(ref: RemoteModelRef, name: str, default: float) -> float:
    raw = ref.option(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise QmdError(INVALID_ARGUMENT, f"{ref.text!r}: option {name} must be a positive number")
    return value


class RemoteEndpoint:
    """A parsed reference plus its HTTP client, shared by the three adapters."""

    def __init__(
        self,
        reference: str,
        role: str,
        env: Mapping[str, str] | None = None,
        *,
        sleep: Callable[[float], None] | None = None,
        stop_check: Callable[[], None] = never_given_up,
    ) -> None:
        environ = os.environ if env is None else env
        self.ref = parse_remote_ref(reference)
        self.role = role
        self.base_url = base_url_for(self.ref, environ)
        default_timeout = _env_float(environ, "QMD_REMOTE_TIMEOUT", DEFAULT_TIMEOUT_S)
        self.timeout = _option_number(self.ref, "timeout", default_timeout)
        self.concurrency = int(_option_number(self.ref, "concurrency", DEFAULT_CONCURRENCY))
        key, source = read_api_key(self.ref, role, environ)
        self.client = JsonHttpClient(
            self.base_url,
            describe=self.unavailable,
            api_key=key,
            key_source=source,
            timeout=self.timeout,
            max_attempts=int(_option_number(self.ref, "retries", DEFAULT_RETRIES)),
            stop_check=stop_check,
        )
        if sleep is not None:
            self.client.sleep = sleep
        self._checked = False
        self._check_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    @property
    def model(self) -> str:
        return self.ref.model

    def unavailable(self, reason: str) -> QmdError:
        # The reference holds no secret (parse_remote_ref refuses credentials), so it and the
        # redacted URL are safe to show.
        return QmdError(
            MODEL_UNAVAILABLE,
            f"The {self.role} model {self.ref.text!r} at {self.client_url()} is not available: "
            f"{reason}",
        )

    def client_url(self) -> str:
        from adapters.models.http_json import public_url

        return public_url(self.base_url)

    def call(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """POST (or GET without a body), turning HTTP errors into `model-unavailable`."""
        self.ensure_model_served()
        return self._raw(path, body)

    def _raw(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        method = "GET" if body is None else "POST"
        try:
            return self.client.request(method, path, body)
        except HttpStatusError as error:
            raise self.client.fail(method, path, error) from None

    def served_models(self) -> list[str] | None:
        """Model names the server lists, or None when it has no listing endpoint."""
        path = "/api/tags" if self.ref.provider == "ollama" else "/models"
        try:
            data = self.client.request("GET", path, None)
        except HttpStatusError as error:
            if error.status in (404, 405, 501):
                return None
            raise self.client.fail("GET", path, error) from None
        if self.ref.provider == "ollama":
            items = data.get("models", []) if isinstance(data, dict) else []
            return [str(m.get("name") or m.get("model")) for m in items if isinstance(m, dict)]
        items = data.get("data", []) if isinstance(data, dict) else []
        return [str(m.get("id")) for m in items if isinstance(m, dict)]

    def model_listed(self, served: Sequence[str]) -> bool:
        wanted = self.ref.model
        if self.ref.provider == "ollama" and ":" not in wanted:
            return wanted in served or f"{wanted}:latest" in served
        return wanted in served

    def ensure_model_served(self) -> None:
        """Once per process: the server must list the model. Some servers (llama-cpp-python's
        among them) answer for an unknown model name with whatever they have loaded, which
        would store vectors of the wrong model under this one's name."""
        if self._checked:
            return
        with self._check_lock:
            if self._checked:
                return
            served = self.served_models()
            if served is not None and not self.model_listed(served):
                listing = ", ".join(served[:10]) or "nothing"
                raise self.unavailable(
                    f"the server does not serve a model named {self.ref.model!r} "
                    f"(it lists: {listing})"
                )
            self._checked = True

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """`fn` over `items`, `concurrency` at a time, results in order. The worker threads
        live as long as the endpoint, so their kept-alive connections are reused. Each item
        runs in a copy of the caller's context, so it sees the request it serves (whether it
        has been given up)."""
        if len(items) <= 1 or self.concurrency <= 1:
            return [fn(item) for item in items]
        with self._check_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.concurrency, thread_name_prefix="qmd-remote"
                )
        contexts = [contextvars.copy_context() for _ in items]
        return list(self._pool.map(lambda c, item: c.run(fn, item), contexts, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.client.close()


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(env.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


# ---------------------------------------------------------------------------- embeddings


def remote_embed_family(ref: RemoteModelRef) -> EmbedFamily:
    """Prompt format: `?format=` if given, else by model name; other models get raw text
    (a hosted model formats its own input; the gemma prefix would only add noise)."""
    chosen = ref.option("format")
    if chosen in ("embeddinggemma", "qwen3", "plain"):
        return (
            "embeddinggemma"
            if chosen == "embeddinggemma"
            else ("qwen3" if chosen == "qwen3" else "plain")
        )
    if chosen:
        raise QmdError(
            INVALID_ARGUMENT,
            f"{ref.text!r}: format must be embeddinggemma, qwen3 or plain",
        )
    if _GEMMA_EMBED.search(ref.model):
        return "embeddinggemma"
    if _QWEN_EMBED.search(ref.model):
        return "qwen3"
    return "plain"


class RemoteEmbedder:
    """`Embedder` over `/embeddings` (OpenAI-compatible) or `/api/embed` (Ollama).

    Requests carry at most `batch` inputs and about `DEFAULT_BATCH_TOKENS` estimated tokens,
    `concurrency` of them in flight. Vectors are L2-normalised here, as the local adapter's.
    """

    def __init__(
        self,
        reference: str,
        *,
        env: Mapping[str, str] | None = None,
        cache: LlmCache | None = None,
        endpoint: RemoteEndpoint | None = None,
        stop_check: Callable[[], None] = never_given_up,
    ) -> None:
        self.endpoint = endpoint or RemoteEndpoint(reference, "embed", env, stop_check=stop_check)
        self.ref = self.endpoint.ref
        self.family = remote_embed_family(self.ref)
        self.batch_inputs = int(_option_number(self.ref, "batch", DEFAULT_BATCH_INPUTS))
        declared = self.ref.option("dimensions")
        self._declared_dimensions = (
            int(_option_number(self.ref, "dimensions", 1)) if declared else None
        )
        self._dimensions: int | None = self._declared_dimensions
        self._live_dimensions = False
        self._cache = cache
        self._tokenizer: Callable[[str], int] | None = None
        self._token_offset = 0
        self._tokenizer_lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return self.ref.identity

    # The fingerprint (domain.usecases.embedding) includes these, so a different served
    # model or dimension marks every stored vector stale instead of mixing them.
    def embedding_space(self) -> str:
        return self._space(self.dimensions)

    def known_embedding_space(self) -> str | None:
        """The space without network access: declared or cached dimension, else None."""
        dims = self._dimensions or self._cached_dimensions()
        if dims is None:
            return None
        self._dimensions = dims
        return self._space(dims)

    def _space(self, dimensions: int) -> str:
        return f"{self.ref.provider}:{self.ref.model} dimensions={dimensions}"

    @property
    def dimensions(self) -> int:
        """What the server answers now (asked once per process): a vector is only stored
        under a fingerprint whose dimension was seen live, never a cached one."""
        if not self._live_dimensions:
            (vector,) = self._request(["dimension probe"])
            if self._declared_dimensions and len(vector) != self._declared_dimensions:
                raise self.endpoint.unavailable(
                    f"the server answers with {len(vector)} dimensions, "
                    f"not the {self._declared_dimensions} the reference declares"
                )
            self._dimensions = len(vector)
            self._live_dimensions = True
            self._store_dimensions(self._dimensions)
        assert self._dimensions is not None
        return self._dimensions

    def _dimensions_key(self) -> str:
        return llm_cache_key("remoteEmbedDimensions", {"model": self.model_name})

    def _cached_dimensions(self) -> int | None:
        if self._cache is None:
            return None
        raw = self._cache.get(self._dimensions_key())
        return int(raw) if raw and raw.isdigit() else None

    def _store_dimensions(self, dims: int) -> None:
        if self._cache is not None:
            self._cache.put(self._dimensions_key(), str(dims))

    def format_query(self, text: str) -> str:
        if self.family == "embeddinggemma":
            return f"task: search result | query: {text}"
        if self.family == "qwen3":
            return f"Instruct: {QWEN_EMBED_INSTRUCTION}\nQuery: {text}"
        return text

    def format_document(self, title: str, text: str) -> str:
        if self.family == "embeddinggemma":
            return f"title: {title or 'none'} | text: {text}"
        return f"{title}\n{text}" if title else text

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return self._embed([self.format_query(t) for t in texts])

    def embed_documents(self, items: Sequence[tuple[str, str]]) -> list[list[float]]:
        return self._embed([self.format_document(title, text) for title, text in items])

    def warm_up(self) -> None:
        self.endpoint.ensure_model_served()

    def close(self) -> None:
        self.endpoint.close()

    # ------------------------------------------------------------------ tokens

    def count_tokens(self, text: str) -> int:
        """The server's own count where it offers a tokenizer endpoint (llama.cpp's and
        vLLM's servers, llama-cpp-python's); else an over-estimate from the text length."""
        if not text:
            return 0
        with self._tokenizer_lock:
            if self._tokenizer is None:
                self._tokenizer = self._find_tokenizer()
        return max(1, self._tokenizer(text))

    def _find_tokenizer(self) -> Callable[[str], int]:
        if self.ref.provider == "openai":
            root = JsonHttpClient(
                self.endpoint.client.root_url(),
                describe=self.endpoint.unavailable,
                api_key=self.endpoint.client.api_key,
                timeout=self.endpoint.timeout,
                max_attempts=self.endpoint.client.max_attempts,
            )
            model = self.ref.model
            probes: list[tuple[str, Callable[[str], dict[str, Any]], Callable[[Any], int]]] = [
                # llama-cpp-python's server
                (
                    "/extras/tokenize/count",
                    lambda t: {"input": t, "model": model},
                    lambda d: int(d["count"]),
                ),
                # llama.cpp's llama-server
                ("/tokenize", lambda t: {"content": t}, lambda d: len(d["tokens"])),
                # vLLM
                ("/tokenize", lambda t: {"model": model, "prompt": t}, lambda d: int(d["count"])),
            ]
            for path, body, read in probes:
                try:
                    empty = read(root.post(path, body("")))
                    read(root.post(path, body("probe")))
                except (HttpStatusError, KeyError, TypeError, ValueError, AttributeError):
                    continue  # not this server's tokenizer API (transport errors propagate)
                # Servers count the special tokens they add (BOS/CLS/SEP); the local
                # adapter counts text tokens only, so subtract what an empty text costs.
                self._token_offset = empty

                def count(text: str, path: str = path, body: Any = body, read: Any = read) -> int:
                    try:
                        return int(read(root.post(path, body(text)))) - self._token_offset
                    except HttpStatusError as error:
                        raise root.fail("POST", path, error) from None

                return count
        return estimate_tokens

    # ------------------------------------------------------------------ requests

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        batches = split_batches(texts, self.batch_inputs, DEFAULT_BATCH_TOKENS)
        results = self.endpoint.map(self._request, batches)
        vectors = [v for batch in results for v in batch]
        dims = {len(v) for v in vectors}
        if len(dims) != 1 or (self._dimensions is not None and dims != {self._dimensions}):
            raise self.endpoint.unavailable(
                f"the server answered with vectors of {sorted(dims)} dimensions where "
                f"{self._dimensions or 'one size'} was expected"
            )
        if self._dimensions is None:
            self._dimensions = dims.pop()
            self._live_dimensions = True
            self._store_dimensions(self._dimensions)
        return vectors

    def _request(self, texts: Sequence[str]) -> list[list[float]]:
        if self.ref.provider == "ollama":
            body: dict[str, Any] = {"model": self.ref.model, "input": list(texts), "truncate": True}
            if self._declared_dimensions:
                body["dimensions"] = self._declared_dimensions
            data = self.endpoint.call("/api/embed", body)
            raw = data.get("embeddings") if isinstance(data, dict) else None
        else:
            body = {"model": self.ref.model, "input": list(texts), "encoding_format": "float"}
            if self._declared_dimensions:
                body["dimensions"] = self._declared_dimensions
            data = self.endpoint.call("/embeddings", body)
            items = data.get("data") if isinstance(data, dict) else None
            raw = None
            if isinstance(items, list):
                ordered = sorted(items, key=lambda d: int(d.get("index", 0)))
                raw = [d.get("embedding") for d in ordered]
        if not isinstance(raw, list) or len(raw) != len(texts):
            raise self.endpoint.unavailable(
                f"malformed embeddings answer: expected {len(texts)} vectors"
            )
        return [normalize(_floats(v, self.endpoint)) for v in raw]


def _floats(value: Any, endpoint: RemoteEndpoint) -> list[float]:
    try:
        vector = [float(x) for x in value]
    except (TypeError, ValueError):
        raise endpoint.unavailable("malformed embeddings answer: not a list of numbers") from None
    if not vector or not all(math.isfinite(x) for x in vector):
        raise endpoint.unavailable("malformed embeddings answer: empty or non-finite vector")
    return vector


def normalize(vector: list[float]) -> list[float]:
    length = math.sqrt(sum(x * x for x in vector))
    return [x / length for x in vector] if length > 0 else vector


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / ESTIMATED_CHARS_PER_TOKEN)


def split_batches(texts: Sequence[str], max_inputs: int, max_tokens: int) -> list[list[str]]:
    """Consecutive groups of at most `max_inputs` texts and about `max_tokens` (estimated);
    a text over the budget travels alone."""
    batches: list[list[str]] = []
    current: list[str] = []
    budget = 0
    for text in texts:
        cost = estimate_tokens(text)
        if current and (len(current) >= max_inputs or budget + cost > max_tokens):
            batches.append(current)
            current, budget = [], 0
        current.append(text)
        budget += cost
    if current:
        batches.append(current)
    return batches


# ---------------------------------------------------------------------------- reranking


class RemoteReranker:
    """`Reranker` over a `/rerank` endpoint, or chat completions judging yes/no.

    `?rerank=endpoint` posts `{model, query, documents}` and reads `results[].relevance_score`
    (clamped to [0, 1]; `?scores=logits` passes raw logits through a sigmoid instead).
    `?rerank=chat` asks the Qwen3-Reranker question as a chat and scores
    P(yes) / (P(yes) + P(no)) from the first token's `top_logprobs`; without logprobs the
    answer text gives 1, 0 or 0.5. By default the endpoint is tried first and chat is used
    when the server has no `/rerank`.
    Ollama has no rerank endpoint: its OpenAI-compatible `/v1` chat is used.
    """

    def __init__(
        self,
        reference: str,
        *,
        env: Mapping[str, str] | None = None,
        cache: LlmCache | None = None,
        endpoint: RemoteEndpoint | None = None,
        stop_check: Callable[[], None] = never_given_up,
    ) -> None:
        self.endpoint = endpoint or RemoteEndpoint(reference, "rerank", env, stop_check=stop_check)
        self.ref = self.endpoint.ref
        self._cache = cache
        mode = self.ref.option("rerank")
        if mode not in ("", "endpoint", "chat"):
            raise QmdError(INVALID_ARGUMENT, f"{self.ref.text!r}: rerank must be endpoint or chat")
        if self.ref.provider == "ollama":
            if mode == "endpoint":
                raise QmdError(INVALID_ARGUMENT, f"{self.ref.text!r}: Ollama has no rerank API")
            mode = "chat"
            self._chat_prefix = "/v1"
        else:
            self._chat_prefix = ""
        self.mode = mode

    @property
    def model_name(self) -> str:
        return self.ref.identity

    def warm_up(self) -> None:
        self.endpoint.ensure_model_served()

    def close(self) -> None:
        self.endpoint.close()

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        scores: dict[str, float] = {}
        missing: list[str] = []
        for doc in dict.fromkeys(documents):  # identical texts are scored once
            cached = self._cached(query, doc)
            if cached is None:
                missing.append(doc)
            else:
                scores[doc] = cached
        if missing:
            fresh = self._score(query, missing)
            for doc, score in zip(missing, fresh, strict=True):
                scores[doc] = score
                self._store(query, doc, score)
        return [scores[d] for d in documents]

    def _cached(self, query: str, doc: str) -> float | None:
        return cached_rerank_score(self._cache, self.model_name, query, doc)

    def _store(self, query: str, doc: str, score: float) -> None:
        store_rerank_score(self._cache, self.model_name, query, doc, score)

    def _score(self, query: str, docs: list[str]) -> list[float]:
        if self.mode in ("", "endpoint"):
            try:
                return self._score_endpoint(query, docs)
            except _NoRerankEndpointError:
                if self.mode == "endpoint":
                    raise self.endpoint.unavailable(
                        "the server has no /rerank endpoint (use ?rerank=chat)"
                    ) from None
                self.mode = "chat"
        return self.endpoint.map(lambda d: self._score_chat(query, d), docs)

    def _score_endpoint(self, query: str, docs: list[str]) -> list[float]:
        self.endpoint.ensure_model_served()
        body = {"model": self.ref.model, "query": query, "documents": docs, "top_n": len(docs)}
        try:
            data = self.endpoint.client.post("/rerank", body)
        except HttpStatusError as error:
            if error.status in (404, 405, 501):
                raise _NoRerankEndpointError from None
            raise self.endpoint.client.fail("POST", "/rerank", error) from None
        results = data.get("results", data.get("data")) if isinstance(data, dict) else None
        scores: list[float | None] = [None] * len(docs)
        for item in results if isinstance(results, list) else []:
            try:
                index = int(item["index"])
                value = float(item.get("relevance_score", item.get("score")))
            except (KeyError, TypeError, ValueError):
                continue
            if 0 <= index < len(docs) and math.isfinite(value):
                scores[index] = value
        if any(s is None for s in scores):
            raise self.endpoint.unavailable("malformed rerank answer: not every document scored")
        present = [s for s in scores if s is not None]
        if self.ref.option("scores") == "logits":  # e.g. llama-server with some models
            return [1.0 / (1.0 + math.exp(-max(-500.0, min(500.0, s)))) for s in present]
        return [min(1.0, max(0.0, s)) for s in present]

    def _score_chat(self, query: str, doc: str) -> float:
        body = {
            "model": self.ref.model,
            "messages": [
                {"role": "system", "content": RERANK_SYSTEM},
                {
                    "role": "user",
                    "content": f"<Instruct>: {RERANK_INSTRUCTION}\n<Query>: {query}\n"
                    f"<Document>: {doc[:RERANK_DOC_CHARS]}",
                },
            ],
            "max_tokens": 1,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": 20,
        }
        data = self.endpoint.call(self._chat_prefix + "/chat/completions", body)
        try:
            choice = data["choices"][0]
            text = str((choice.get("message") or {}).get("content") or "")
        except (KeyError, IndexError, TypeError):
            raise self.endpoint.unavailable("malformed chat answer: no choices") from None
        return yes_probability(choice.get("logprobs"), text)


class _NoRerankEndpointError(Exception):
    pass


def yes_probability(logprobs: Any, text: str) -> float:
    """P(yes) among {yes, no} from the first generated token's top logprobs."""
    yes = no = 0.0
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if isinstance(content, list) and content and isinstance(content[0], dict):
        for candidate in content[0].get("top_logprobs") or []:
            try:
                token = str(candidate["token"]).strip().lower()
                probability = math.exp(float(candidate["logprob"]))
            except (KeyError, TypeError, ValueError, OverflowError):
                continue
            if token == "yes":
                yes += probability
            elif token == "no":
                no += probability
    if yes + no > 0:
        return yes / (yes + no)
    answer = text.strip().lower()
    if answer.startswith("yes"):
        return 1.0
    if answer.startswith("no"):
        return 0.0
    return 0.5


# ---------------------------------------------------------------------------- expansion


class RemoteQueryExpander:
    """`QueryExpander` over chat completions (or Ollama's `/api/chat`).

    The answer is asked for as JSON (`response_format` with a JSON schema; servers that
    refuse it are asked with llama-cpp-python's `json_object` + schema, then without any
    format) and parsed leniently: JSON `{queries: [{type, query}]}` or `type: text` lines.
    """

    def __init__(
        self,
        reference: str,
        *,
        env: Mapping[str, str] | None = None,
        cache: LlmCache | None = None,
        max_tokens: int = 600,
        temperature: float = 0.7,
        seed: int = 42,
        endpoint: RemoteEndpoint | None = None,
        stop_check: Callable[[], None] = never_given_up,
    ) -> None:
        self.endpoint = endpoint or RemoteEndpoint(
            reference, "generate", env, stop_check=stop_check
        )
        self.ref = self.endpoint.ref
        self._cache = cache
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self._formats: list[dict[str, Any] | None] = [
            {
                "type": "json_schema",
                "json_schema": {"name": "query_expansion", "schema": EXPAND_SCHEMA},
            },
            {"type": "json_object", "schema": EXPAND_SCHEMA},
            None,
        ]

    @property
    def model_name(self) -> str:
        return self.ref.identity

    def warm_up(self) -> None:
        self.endpoint.ensure_model_served()

    def close(self) -> None:
        self.endpoint.close()

    def cache_key(self, query: str) -> str:
        return llm_cache_key("expandQuery", {"query": query, "model": self.model_name})

    def expand(self, query: str) -> list[SubQuery]:
        key = self.cache_key(query)
        if self._cache is not None and (raw := self._cache.get(key)) is not None:
            cached = _decode(raw)
            if cached is not None:
                return cached
        text = self.generate(query)  # QmdError (server unavailable) reaches the caller
        parsed = parse_expansion_answer(text)
        items = filter_expansions(query, parsed) or fallback_expansion(query)
        if not text.strip():
            items = error_expansion(query)
        items = [s for s in items if s.query != query]
        if items and self._cache is not None:
            self._cache.put(key, _encode(items))
        return items

    def generate(self, query: str) -> str:
        """The model's raw answer for `query`."""
        messages = [{"role": "user", "content": EXPAND_INSTRUCTION.format(query=query)}]
        if self.ref.provider == "ollama":
            body: dict[str, Any] = {
                "model": self.ref.model,
                "messages": messages,
                "stream": False,
                "format": EXPAND_SCHEMA,
                "options": {
                    "temperature": self.temperature,
                    "seed": self.seed,
                    "num_predict": self.max_tokens,
                },
            }
            data = self.endpoint.call("/api/chat", body)
            try:
                return str(data["message"]["content"])
            except (KeyError, TypeError):
                raise self.endpoint.unavailable("malformed chat answer: no message") from None
        while True:
            response_format = self._formats[0]
            body = {
                "model": self.ref.model,
                "messages": messages,
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
                "seed": self.seed,
            }
            if response_format is not None:
                body["response_format"] = response_format
            self.endpoint.ensure_model_served()
            try:
                # Not retried with a format: a refusal of it must not cost the backoff waits.
                data = self.endpoint.client.post(
                    "/chat/completions", body, retry=response_format is None
                )
            except HttpStatusError as error:
                if response_format is not None and refuses_format(error):
                    self._formats.pop(0)  # remembered for the life of this adapter
                    continue
                if response_format is not None and error.status in RETRYABLE_STATUS:
                    try:
                        data = self.endpoint.client.post("/chat/completions", body)
                    except HttpStatusError as again:
                        raise self.endpoint.client.fail(
                            "POST", "/chat/completions", again
                        ) from None
                else:
                    raise self.endpoint.client.fail("POST", "/chat/completions", error) from None
            try:
                return str(data["choices"][0]["message"]["content"] or "")
            except (KeyError, IndexError, TypeError):
                raise self.endpoint.unavailable("malformed chat answer: no choices") from None


def refuses_format(error: HttpStatusError) -> bool:
    """Whether an error answer says the server does not take our `response_format`
    (llama-cpp-python's server says so with a 500)."""
    if error.status in (400, 422):
        return True
    return error.status == 500 and "response_format" in error.body


def parse_expansion_answer(text: str) -> list[SubQuery]:
    """`{queries: [{type, query}]}`, a bare list of those, or `type: text` lines."""
    stripped = text.strip()
    fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", stripped, re.DOTALL)
    if fenced:
        stripped = fenced.group(1)
    try:
        data = strict_json(stripped)  # the model's text: no depth past 64, no NaN
    except ValueError:
        return parse_expansion(text)
    if isinstance(data, dict):
        data = data.get("queries", data.get("expansions", []))
    items: list[SubQuery] = []
    for entry in data if isinstance(data, list) else []:
        if not isinstance(entry, dict):
            continue
        kind = str(entry.get("type", "")).strip().lower()
        value = " ".join(str(entry.get("query", entry.get("text", ""))).split())
        if kind in _EXPAND_TYPES and value:
            items.append(SubQuery(_EXPAND_TYPES[kind], value))
    return items


def _encode(items: Sequence[SubQuery]) -> str:
    return json.dumps(
        [{"type": s.type, "query": s.query} for s in items],
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _decode(raw: str) -> list[SubQuery] | None:
    try:
        data = json.loads(raw)
        items = [SubQuery(d["type"], str(d["query"])) for d in data]
    except (ValueError, KeyError, TypeError):
        return None
    return items if items and all(s.type in _EXPAND_TYPES for s in items) else None


# ---------------------------------------------------------------------------- doctor


def check_endpoint(
    reference: str, role: str, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """What `qmd doctor` reports for a remote model: URL (no secrets), reachable, model listed,
    and for embeddings the dimension. Never raises; the key never appears."""
    entry: dict[str, Any] = {"reference": reference, "remote": True}
    try:
        endpoint = RemoteEndpoint(reference, role, env)
    except QmdError as exc:
        entry.update(available=False, error=exc.message)
        return entry
    entry["url"] = endpoint.client_url()
    entry["key"] = endpoint.client.key_source or None
    try:
        served = endpoint.served_models()
        entry["reachable"] = True
        entry["listed"] = None if served is None else endpoint.model_listed(served)
        if served is not None and not entry["listed"]:
            raise endpoint.unavailable(
                f"the server does not serve a model named {endpoint.model!r} "
                f"(it lists: {', '.join(served[:10]) or 'nothing'})"
            )
        if role == "embed":
            entry["dimensions"] = RemoteEmbedder(reference, endpoint=endpoint).dimensions
    except QmdError as exc:
        entry.update(available=False, error=exc.message)
    else:
        entry["available"] = True
    finally:
        endpoint.close()
    entry.setdefault("reachable", False)
    return entry
