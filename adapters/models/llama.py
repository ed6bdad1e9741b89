"""Embedder, Reranker and QueryExpander over llama.cpp (llama-cpp-python).

* Nothing is imported or loaded until a model is first needed, so a CLI run that never touches
  vectors never pays for llama.cpp (or fails on its absence).
* `verbose=False` keeps llama.cpp quiet: only errors reach stderr, nothing reaches stdout (the
  MCP stdio channel). llama-cpp-python points fds 1/2 at /dev/null while a model loads
  (~0.1–1 s); MCP frames are unaffected because the stdio transport writes them to a duplicate
  of the original fd 1 (adapters/mcp/stdio.py), so a model may load mid-session.
* GPU: all layers are offloaded when the build supports it, unless `force_cpu` (`--no-gpu`),
  `QMD_FORCE_CPU` or `QMD_LLAMA_GPU=false` says otherwise.
* One llama.cpp context is not thread-safe, so every call on a model holds that model's lock.
* A call whose request is given up stops at its next step (REQ-SEARCH-CANCEL-MODEL-001): while
  it waits for the lock, between embedding batches, between rerank documents, after each
  generated token. `stop_check` (injected by the composition root) raises WorkCancelledError.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import math
import os
import re
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from adapters.models.constrained import Sampling, generate_constrained
from adapters.models.embed_text import (
    EmbedFamily,
    detect_family,
    format_document,
    format_query,
)
from adapters.models.idle import UseLock, never_given_up
from adapters.models.references import (
    ENV_VARS,
    ROLES,
    ModelResolver,
    select_model_refs,
)
from domain.errors import MODEL_UNAVAILABLE, QmdError
from domain.model import SubQuery, SubQueryType
from domain.ports import LlmCache, WorkCancelledError

DEFAULT_EMBED_CONTEXT = 2048
DEFAULT_RERANK_CONTEXT = 4096
DEFAULT_EXPAND_CONTEXT = 2048
RERANK_QUERY_RESERVE = 512  # tokens kept for the chat template around query and document
TRUNCATION_MARGIN = 4  # the original truncates to limit - 4 tokens

RERANK_SYSTEM = (
    "Judge whether the Document meets the requirements based on the Query and the Instruct "
    'provided. Note that the answer can only be "yes" or "no".'
)
RERANK_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"

EXPAND_PROMPT = "/no_think Expand this search query: {query}"
# One or more `type: text` lines; what the original constrains its expansion model with.
EXPAND_GRAMMAR = r"""
root    ::= line+
line    ::= type ": " content "\n"
type    ::= "lex" | "vec" | "hyde"
content ::= [^\n]+
"""
_EXPAND_TYPES: dict[str, SubQueryType] = {"lex": "lex", "vec": "vec", "hyde": "hyde"}
# The grammar's `content` has no end: a model caught in a loop writes one line until the
# 600-token cap (Qwen2.5-Coder-1.5B: "remove a directory (remove a directory) (...)" x 40).
# The default surfaces stop such a runaway line here (REQ-SEARCH-EXPAND-LINE-001).
EXPAND_LINE_TOKENS = 128

_LOAD_LOCK = threading.Lock()
log = logging.getLogger("qmd.models")
GGML_LOG_LEVEL_ERROR = 4  # ggml: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5


# ---------------------------------------------------------------------------- runtime helpers


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


_quiet_logger: Any = None  # the ctypes callback must stay referenced while llama.cpp holds it


def import_llama_cpp() -> Any:
    """The `llama_cpp` module, or MODEL_UNAVAILABLE saying how to install it."""
    global _quiet_logger
    # llama.cpp's CPU backend uses OpenMP, whose threads busy-wait at every barrier by default.
    # With more runnable threads than cores (a server answering while `qmd embed` runs, or two
    # servers) the spinning threads starve the working ones: a MiniLM query embedding took
    # 1,168 ms instead of 12.8 ms with passive waiting. libgomp reads this when it is loaded,
    # i.e. on the import below; an explicit setting in the environment wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp
    except ImportError as exc:
        raise QmdError(
            MODEL_UNAVAILABLE,
            "llama-cpp-python is not installed, so local models cannot run. Install it with "
            "`scripts/install_llama.sh` (CPU) or `QMD_LLAMA_CUDA=1 scripts/install_llama.sh`.",
            brief="llama-cpp-python is not installed",
        ) from exc
    if _quiet_logger is None and not _truthy(os.environ.get("QMD_LLAMA_VERBOSE")):
        # llama-cpp-python's callback maps ggml's levels one step off, so with verbose=False
        # it still prints warnings (e.g. gemma-3's iSWA cache note); keep only errors.
        def log(level: int, text: bytes, _user: Any) -> None:
            if level == GGML_LOG_LEVEL_ERROR:
                sys.stderr.write(text.decode("utf-8", errors="replace"))

        _quiet_logger = llama_cpp.llama_log_callback(log)
        llama_cpp.llama_log_set(_quiet_logger, ctypes.c_void_p(0))
    return llama_cpp


def use_gpu(force_cpu: bool = False, env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    if force_cpu or _truthy(env.get("QMD_FORCE_CPU")):
        return False
    if (env.get("QMD_LLAMA_GPU") or "").strip().lower() in ("false", "0", "off", "no", "cpu"):
        return False
    return bool(import_llama_cpp().llama_supports_gpu_offload())


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        value = int(raw)
    except ValueError:
        return default
    return value if value > 0 else default


def llm_cache_key(tag: str, body: Mapping[str, Any]) -> str:
    """The original's cache key: sha256(tag + JSON.stringify(body)), keys in insertion order."""
    payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((tag + payload).encode("utf-8")).hexdigest()


def _rerank_key(model: str, query: str, doc: str) -> str:
    return llm_cache_key("rerank", {"query": query, "model": model, "chunk": doc})


def cached_rerank_score(cache: LlmCache | None, model: str, query: str, doc: str) -> float | None:
    """A rerank score from `llm_cache` (local and remote rerankers share the key)."""
    if cache is None:
        return None
    raw = cache.get(_rerank_key(model, query, doc))
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def store_rerank_score(
    cache: LlmCache | None, model: str, query: str, doc: str, score: float
) -> None:
    if cache is not None:
        cache.put(_rerank_key(model, query, doc), json.dumps(score))


_RETRY_AFTER_S = 60.0


class _LazyModel:
    """A `llama_cpp.Llama`, resolved and loaded on first use, shared under one lock."""

    def __init__(
        self,
        reference: str,
        role: str,
        resolver: ModelResolver | None,
        force_cpu: bool,
        n_threads: int | None,
        options: Callable[[], dict[str, Any]],
    ) -> None:
        self.reference = reference
        self.role = role
        self._resolver = resolver
        self._force_cpu = force_cpu
        self._n_threads = n_threads
        self._options = options
        self._llm: Any = None
        self.path: Path | None = None
        self.lock = UseLock()  # held by every use; its last release is the last use
        self._failure: tuple[float, QmdError] | None = None
        self._identity: str | None = None

    def get(self) -> Any:
        with self.lock:
            if self._llm is None:
                # A model that could not be had is not looked for again on every call (a
                # long-lived server would pay the lookup per request); retry after a while.
                if self._failure and time.monotonic() - self._failure[0] < _RETRY_AFTER_S:
                    raise self._failure[1]
                try:
                    self._llm = self.load(**self._options())
                except QmdError as error:
                    self._failure = (time.monotonic(), error)
                    raise
                self._failure = None
            return self._llm

    def cache_identity(self) -> str:
        """The model's name in LLM cache keys (REQ-INDEX-LLMCACHE-002), read from the file
        once: what this process loads is what it first found there."""
        if self._identity is None:
            resolver = self._resolver or ModelResolver()
            self._identity = resolver.cache_identity(self.reference)
        return self._identity

    def resolved_path(self) -> Path:
        if self.path is None:
            resolver = self._resolver or ModelResolver()
            self.path = resolver.resolve(self.reference, self.role)
        return self.path

    def load(self, **options: Any) -> Any:
        llama_cpp = import_llama_cpp()
        self.resolved_path()
        kwargs: dict[str, Any] = {
            "model_path": str(self.path),
            "n_gpu_layers": -1 if use_gpu(self._force_cpu) else 0,
            "verbose": False,
        }
        # llama-cpp-python defaults to half the cores; QMD is the only heavy work in its process.
        kwargs["n_threads"] = self._n_threads or os.cpu_count() or 1
        kwargs.update(options)
        with _LOAD_LOCK:
            try:
                return llama_cpp.Llama(**kwargs)
            except (ValueError, RuntimeError, OSError) as exc:
                raise QmdError(
                    MODEL_UNAVAILABLE,
                    f"The {self.role} model {self.reference!r} ({self.path}) could not be "
                    f"loaded by llama.cpp: {exc}",
                    brief="llama.cpp could not load its file",
                ) from exc

    def replace(self, llm: Any) -> None:
        with self.lock:
            self.close()
            self._llm = llm

    def close(self) -> None:
        with self.lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None

    @property
    def loaded(self) -> bool:
        return self._llm is not None


def _tokenize(llm: Any, text: str, add_bos: bool = False) -> list[int]:
    return list(llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False))


def _detokenize(llm: Any, tokens: Sequence[int]) -> str:
    return bytes(llm.detokenize(list(tokens))).decode("utf-8", errors="ignore")


# ---------------------------------------------------------------------------- embeddings


class LlamaEmbedder:
    """`Embedder` over a GGUF embedding model (embeddinggemma, Qwen3-Embedding, BERT family).

    `model` is the reference as configured (`hf:…` or a path); it is also the model name
    stored with every vector. Each text is embedded in a decode of its own; `batch_size` texts
    run between two checks of `stop_check`.
    """

    def __init__(
        self,
        model: str,
        *,
        resolver: ModelResolver | None = None,
        family: EmbedFamily | None = None,
        context_size: int | None = None,
        batch_size: int = 32,
        force_cpu: bool = False,
        n_threads: int | None = None,
        stop_check: Callable[[], None] = never_given_up,
    ) -> None:
        self._name = model
        self._stop_check = stop_check
        self.family: EmbedFamily = family or detect_family(model)
        self.context_size = context_size or _env_int(
            "QMD_EMBED_CONTEXT_SIZE", DEFAULT_EMBED_CONTEXT
        )
        self.batch_size = max(1, batch_size)
        self._model = _LazyModel(model, "embed", resolver, force_cpu, n_threads, self._load_options)
        self._limit: int | None = None

    def _load_options(self) -> dict[str, Any]:
        # Encoders see a whole sequence in one micro-batch, so batch = ubatch = context.
        # Flash attention on, as node-llama-cpp's "auto" resolves on a CPU: with the same ggml
        # CPU build the vectors are then the original's bit for bit (ADR 0058).
        n = self.context_size
        return {"embedding": True, "n_ctx": n, "n_batch": n, "n_ubatch": n, "flash_attn": True}

    @property
    def model_name(self) -> str:
        return self._name

    def _llm(self) -> Any:
        llm = self._model.get()
        if self._limit is None:
            trained = int(llm._model.n_ctx_train())
            if 0 < trained < self.context_size:
                # A BERT with 512 positions cannot see more; reload with the smaller context
                # instead of keeping a cache it can never fill.
                self.context_size = trained
                llm = self._model.load(**self._load_options())
                self._model.replace(llm)
            self._limit = min(self.context_size, int(llm.n_ctx())) - TRUNCATION_MARGIN
        return llm

    @property
    def dimensions(self) -> int:
        with self._model.lock:
            return int(self._llm().n_embd())

    @property
    def max_input_tokens(self) -> int:
        """Tokens one text may have before `_truncate` cuts it (the model's context, capped by
        its trained positions, less a margin); chunks are sized to fit (KnowsInputLimit)."""
        with self._model.lock:
            self._llm()
            assert self._limit is not None
            return self._limit

    def close(self) -> None:
        self._model.close()
        self._limit = None

    @property
    def resident(self) -> _LazyModel:
        """The loaded model, for unloading it when idle (adapters/models/idle.py)."""
        return self._model

    def format_query(self, text: str) -> str:
        return format_query(self.family, text)

    def format_document(self, title: str, text: str) -> str:
        return format_document(self.family, title, text)

    def count_tokens(self, text: str) -> int:
        with self._model.lock:
            return len(_tokenize(self._llm(), text))

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return self._embed([self.format_query(t) for t in texts])

    def embed_documents(self, items: Sequence[tuple[str, str]]) -> list[list[float]]:
        return self._embed([self.format_document(title, text) for title, text in items])

    def _truncate(self, llm: Any, text: str) -> str:
        assert self._limit is not None
        tokens = _tokenize(llm, text)
        if len(tokens) <= self._limit:
            return text
        return _detokenize(llm, tokens[: self._limit])

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._model.lock.held(self._stop_check):
            llm = self._llm()
            out: list[list[float]] = []
            for start in range(0, len(texts), self.batch_size):
                self._stop_check()  # a request given up stops between batches
                for text in texts[start : start + self.batch_size]:
                    # One text per decode, as the original's getEmbeddingFor. Texts packed into
                    # one decode each attend over the whole packed batch under a mask: the
                    # floats then depend on the neighbours, and with a 2048-token context the
                    # attention cost grows with the square of the packed length (ADR 0058).
                    vector = llm.embed([self._truncate(llm, text)], normalize=True, truncate=True)
                    out.append([float(x) for x in vector[0]])
            return out


# ---------------------------------------------------------------------------- reranking


def rerank_prompt_parts(query: str, instruction: str = RERANK_INSTRUCTION) -> tuple[str, str]:
    """Qwen3-Reranker's chat layout around the document: (before, after)."""
    before = (
        f"<|im_start|>system\n{RERANK_SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\n<Instruct>: {instruction}\n<Query>: {query}\n<Document>: "
    )
    after = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    return before, after


# node-llama-cpp ranks only with a classifier head; without one the original 2.8.3 warns
# "Reranker unavailable" and gives every candidate this score (llm.js, `model: "fallback"`).
RANKING_HEAD_TENSORS = frozenset({"cls.weight", "cls.output.weight"})
FALLBACK_RERANK_SCORE = 0.5


_GGUF_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def gguf_tensor_names(path: Path) -> list[str]:
    """The tensor names of a GGUF file, read from its header only (metadata is skipped).

    A plain reader: gguf.GGUFReader parses every metadata array (a 262k-token vocabulary takes
    it seconds of CPU), and only the names are wanted here.
    """
    with open(path, "rb") as handle:

        def read(fmt: str) -> Any:
            size = struct.calcsize(fmt)
            data = handle.read(size)
            if len(data) != size:
                raise QmdError(MODEL_UNAVAILABLE, f"{path}: truncated GGUF header")
            return struct.unpack(fmt, data)[0]

        def skip_value(kind: int) -> None:
            if kind == _GGUF_STRING:
                handle.seek(read("<Q"), os.SEEK_CUR)
            elif kind == _GGUF_ARRAY:
                item, count = read("<I"), read("<Q")
                if item in _GGUF_SCALAR_SIZES:
                    handle.seek(_GGUF_SCALAR_SIZES[item] * count, os.SEEK_CUR)
                else:
                    for _ in range(count):
                        skip_value(item)
            elif kind in _GGUF_SCALAR_SIZES:
                handle.seek(_GGUF_SCALAR_SIZES[kind], os.SEEK_CUR)
            else:
                raise QmdError(MODEL_UNAVAILABLE, f"{path}: unknown GGUF value type {kind}")

        if handle.read(4) != b"GGUF":
            raise QmdError(MODEL_UNAVAILABLE, f"{path}: not a GGUF file")
        read("<I")  # version
        tensors, entries = read("<Q"), read("<Q")
        for _ in range(entries):
            handle.seek(read("<Q"), os.SEEK_CUR)  # key
            skip_value(read("<I"))
        names = []
        for _ in range(tensors):
            names.append(handle.read(read("<Q")).decode("utf-8", "replace"))
            handle.seek(8 * read("<I") + 4 + 8, os.SEEK_CUR)  # dims, type, offset
        return names


def has_ranking_head(path: Path) -> bool:
    """Whether a GGUF carries the classifier tensor node-llama-cpp needs to compute rankings."""
    return any(name in RANKING_HEAD_TENSORS for name in gguf_tensor_names(path))


class LlamaReranker:
    """`Reranker`: P(yes) from the {yes, no} logits at the last prompt position.

    Built for Qwen3-Reranker; any causal GGUF runs the same code path (used in tests with
    gemma-3-270m, whose scores are not meaningful). With `original_rules` (the 2.8.3 compat
    server) a model without a ranking head scores every candidate 0.5, as the original does.
    """

    def __init__(
        self,
        model: str,
        *,
        resolver: ModelResolver | None = None,
        context_size: int | None = None,
        instruction: str = RERANK_INSTRUCTION,
        cache: LlmCache | None = None,
        force_cpu: bool = False,
        n_threads: int | None = None,
        original_rules: bool = False,
        stop_check: Callable[[], None] = never_given_up,
    ) -> None:
        self._name = model
        self._stop_check = stop_check
        self.context_size = context_size or _env_int(
            "QMD_RERANK_CONTEXT_SIZE", DEFAULT_RERANK_CONTEXT
        )
        self._original_rules = original_rules
        self._can_rank: bool | None = None
        self.instruction = instruction
        self._cache = cache
        self._model = _LazyModel(
            model,
            "rerank",
            resolver,
            force_cpu,
            n_threads,
            lambda: {"n_ctx": self.context_size, "n_batch": 512, "logits_all": False},
        )
        self._answer_ids: tuple[int, int] | None = None
        # prompt tokens evaluated so far, all calls together (what a rerank costs)
        self.evaluated_tokens = 0

    @property
    def model_name(self) -> str:
        return self._name

    def close(self) -> None:
        self._model.close()

    @property
    def resident(self) -> _LazyModel:
        """The loaded model, for unloading it when idle (adapters/models/idle.py)."""
        return self._model

    def _ranks_like_the_original(self) -> bool:
        if self._can_rank is None:
            self._can_rank = has_ranking_head(self._model.resolved_path())
            if not self._can_rank:
                log.warning(
                    "Reranker unavailable — skipping reranking (Computing rankings is not "
                    "supported for this model.)"
                )
        return self._can_rank

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        if self._original_rules and not self._ranks_like_the_original():
            return [FALLBACK_RERANK_SCORE] * len(documents)
        scores: dict[str, float] = {}
        missing: list[str] = []
        for doc in dict.fromkeys(documents):  # identical texts are scored once
            cached = self._cached(query, doc)
            if cached is None:
                missing.append(doc)
            else:
                scores[doc] = cached
        if missing:
            with self._model.lock.held(self._stop_check):
                llm = self._model.get()
                for doc in missing:
                    self._stop_check()  # a request given up stops between documents
                    scores[doc] = self._score(llm, query, doc)
                    self._store(query, doc, scores[doc])
        return [scores[d] for d in documents]

    def cache_key(self, query: str, doc: str) -> str:
        """Where `doc`'s score for `query` is cached: the original's key, the model named by
        what it is (REQ-INDEX-LLMCACHE-002)."""
        return _rerank_key(self._model.cache_identity(), query, doc)

    def _cached(self, query: str, doc: str) -> float | None:
        return cached_rerank_score(self._cache, self._model.cache_identity(), query, doc)

    def _store(self, query: str, doc: str, score: float) -> None:
        store_rerank_score(self._cache, self._model.cache_identity(), query, doc, score)

    def _answers(self, llm: Any) -> tuple[int, int]:
        if self._answer_ids is None:
            yes, no = _tokenize(llm, "yes"), _tokenize(llm, "no")
            if not yes or not no:
                raise QmdError(
                    MODEL_UNAVAILABLE, f"{self._name}: cannot tokenize the yes/no answers"
                )
            self._answer_ids = (yes[0], no[0])
        return self._answer_ids

    def _score(self, llm: Any, query: str, doc: str) -> float:
        llama_cpp = import_llama_cpp()
        yes_id, no_id = self._answers(llm)
        before, after = rerank_prompt_parts(query, self.instruction)
        # `special=True` so the chat markers become control tokens where the vocabulary has them.
        head = list(llm.tokenize(before.encode("utf-8"), add_bos=True, special=True))
        tail = list(llm.tokenize(after.encode("utf-8"), add_bos=False, special=True))
        # The original's budget: context - 512 (template allowance) - query tokens.
        budget = self.context_size - RERANK_QUERY_RESERVE - len(_tokenize(llm, query))
        doc_tokens = _tokenize(llm, doc)[: max(1, budget)]
        # The head (system, instruction, query) is the same for every candidate of a query:
        # evaluated once and kept in the KV cache, only the document and tail are evaluated
        # for the next one (a fifth of the prompts of a tldr query's 30 candidates). The head
        # is always its own batch, so a candidate's score does not depend on which candidate
        # came first (a batch's size changes the arithmetic's rounding).
        if not _keeps_prefix(llm, head):
            llm.reset()
            llm.eval(head)
            self.evaluated_tokens += len(head)
        llm.eval(doc_tokens + tail)
        self.evaluated_tokens += len(doc_tokens) + len(tail)
        logits = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        yes, no = float(logits[yes_id]), float(logits[no_id])
        # softmax over the two answers == sigmoid of their difference
        return 1.0 / (1.0 + math.exp(no - yes))


def _keeps_prefix(llm: Any, prefix: Sequence[int]) -> bool:
    """Whether `llm`'s KV cache holds `prefix` as its first tokens and now holds nothing
    after it, so evaluation can go on from there.

    Only for a plain attention cache: a sliding-window cache (gemma-3) drops old positions and
    a recurrent state cannot be cut back, so those models evaluate the whole prompt again.
    """
    llama_cpp = import_llama_cpp()
    n = len(prefix)
    if not n or llm.n_tokens < n or list(llm.input_ids[:n]) != list(prefix):
        return False
    if getattr(llm, "_is_recurrent", False) or getattr(llm, "_is_hybrid", False):
        return False
    if llama_cpp.llama_model_n_swa(llm.model) > 0:
        return False
    memory = llama_cpp.llama_get_memory(llm._ctx.ctx)
    if memory is None or llama_cpp.llama_memory_seq_pos_min(memory, 0) != 0:
        return False
    if not llama_cpp.llama_memory_seq_rm(memory, 0, n, -1):
        return False
    llm.n_tokens = n
    return True


# ---------------------------------------------------------------------------- query expansion


def query_terms(query: str) -> list[str]:
    """The original's filter terms: lower-case, non [a-z0-9 whitespace] -> space, split."""
    return re.sub(r"[^a-z0-9\s]", " ", query.lower()).split()


def filter_expansions(query: str, items: Sequence[SubQuery]) -> list[SubQuery]:
    """Keep lines that mention a query term; keep all when the query has no ASCII terms."""
    terms = query_terms(query)
    if not terms:
        return list(items)
    return [s for s in items if any(t in s.query.lower() for t in terms)]


def parse_expansion(text: str) -> list[SubQuery]:
    """`type: text` lines; anything else (other types, no colon, empty text) is dropped."""
    items: list[SubQuery] = []
    for line in text.strip().split("\n"):
        kind, colon, rest = line.partition(":")
        kind, rest = kind.strip(), rest.strip()
        if colon and rest and kind in _EXPAND_TYPES:
            items.append(SubQuery(_EXPAND_TYPES[kind], rest))
    return items


def fallback_expansion(query: str) -> list[SubQuery]:
    """When generation yields nothing usable."""
    return [
        SubQuery("hyde", f"Information about {query}"),
        SubQuery("lex", query),
        SubQuery("vec", query),
    ]


def error_expansion(query: str) -> list[SubQuery]:
    """When generation fails outright."""
    return [SubQuery("lex", query), SubQuery("vec", query)]


def chat_prompt(template: str, user: str) -> str:
    """Wrap `user` in the model's chat turn markers (ChatML or Gemma), or leave it raw."""
    if "<|im_start|>" in template:
        return f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    if "<start_of_turn>" in template:
        return f"<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"
    return f"{user}\n"


class LlamaQueryExpander:
    """`QueryExpander`: grammar-constrained `lex|vec|hyde: text` lines from a small LLM."""

    def __init__(
        self,
        model: str,
        *,
        resolver: ModelResolver | None = None,
        context_size: int | None = None,
        cache: LlmCache | None = None,
        max_tokens: int = 600,
        temperature: float = 0.7,
        top_k: int = 20,
        top_p: float = 0.8,
        presence_penalty: float = 0.5,
        seed: int = 42,
        force_cpu: bool = False,
        n_threads: int | None = None,
        stop_check: Callable[[], None] = never_given_up,
        line_tokens: int | None = EXPAND_LINE_TOKENS,
    ) -> None:
        self._name = model
        self._stop_check = stop_check
        self.context_size = context_size or _env_int(
            "QMD_EXPAND_CONTEXT_SIZE", DEFAULT_EXPAND_CONTEXT
        )
        self._cache = cache
        self.max_tokens = max_tokens
        # None: only `max_tokens` bounds a line (the original's rule, for the compat server)
        self.line_tokens = line_tokens
        # a fixed seed makes the same query expand the same way on every run
        self.sampling = Sampling(temperature, top_k, top_p, presence_penalty, seed)
        self._model = _LazyModel(
            model,
            "generate",
            resolver,
            force_cpu,
            n_threads,
            lambda: {"n_ctx": self.context_size, "seed": seed},
        )
        # tokens written, and those for which the grammar allowed none of the top-k candidates
        # (it was matched against the whole vocabulary), all calls together: what it cost
        self.generated_tokens = 0
        self.grammar_fallbacks = 0

    @property
    def model_name(self) -> str:
        return self._name

    def close(self) -> None:
        self._model.close()

    @property
    def resident(self) -> _LazyModel:
        """The loaded model, for unloading it when idle (adapters/models/idle.py)."""
        return self._model

    def cache_key(self, query: str) -> str:
        """The original's key, the model named by what it is (REQ-INDEX-LLMCACHE-002)."""
        return llm_cache_key("expandQuery", {"query": query, "model": self._model.cache_identity()})

    def expand(self, query: str) -> list[SubQuery]:
        """Cached expansion; items equal to the query itself are dropped (as the original's
        store does) and only a non-empty result is cached."""
        key = self.cache_key(query)
        if self._cache is not None and (raw := self._cache.get(key)) is not None:
            cached = _decode_expansion(raw)
            if cached is not None:
                return cached
        try:
            text = self.generate(query)
        except (QmdError, WorkCancelledError):
            # the model is missing (callers decide whether search goes on without it), or
            # the request was given up: either way nothing is cached
            raise
        except Exception:  # llama.cpp failures surface as assorted exception types
            items = error_expansion(query)
        else:
            items = filter_expansions(query, parse_expansion(text)) or fallback_expansion(query)
        items = [s for s in items if s.query != query]
        if items and self._cache is not None:
            self._cache.put(key, _encode_expansion(items))
        return items

    def generate(self, query: str) -> str:
        """Raw grammar-constrained model output for `query` (adapters/models/constrained.py:
        the grammar is matched against the top-k candidates, not the whole vocabulary)."""
        llama_cpp = import_llama_cpp()
        with self._model.lock.held(self._stop_check):
            llm = self._model.get()
            template = str(llm.metadata.get("tokenizer.chat_template", ""))
            prompt = chat_prompt(template, EXPAND_PROMPT.format(query=query))
            generated = generate_constrained(
                llama_cpp,
                llm,
                prompt,
                EXPAND_GRAMMAR,
                self.sampling,
                max_tokens=self.max_tokens,
                line_tokens=self.line_tokens,
                stop_check=self._stop_check,
            )
            self.generated_tokens += generated.tokens
            self.grammar_fallbacks += generated.fallbacks
            return generated.text


def _encode_expansion(items: Sequence[SubQuery]) -> str:
    return json.dumps(
        [{"type": s.type, "query": s.query} for s in items],
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _decode_expansion(raw: str) -> list[SubQuery] | None:
    """A cached `[{type, query}]` list (older entries say `text`); None when unusable."""
    try:
        data = json.loads(raw)
        items = [SubQuery(d["type"], str(d["query"] if "query" in d else d["text"])) for d in data]
    except (ValueError, KeyError, TypeError):
        return None
    valid = all(s.type in _EXPAND_TYPES for s in items)
    return items if items and valid else None


# ---------------------------------------------------------------------------- doctor


def describe_backend(
    configured: Mapping[str, str] | None = None,
    *,
    resolver: ModelResolver | None = None,
    force_cpu: bool = False,
) -> dict[str, Any]:
    """What `qmd doctor` reports: runtime, GPU offload, and where each model would come from.

    Never downloads: models are looked up in the cache and on disk only.
    """
    info: dict[str, Any] = {"llama_cpp": None, "gpu_offload": None, "force_cpu": force_cpu}
    try:
        llama_cpp = import_llama_cpp()
    except QmdError as exc:
        info["error"] = exc.message
    else:
        info["llama_cpp"] = str(getattr(llama_cpp, "__version__", "unknown"))
        info["gpu_offload"] = bool(llama_cpp.llama_supports_gpu_offload())
        info["gpu_used"] = use_gpu(force_cpu)
    resolver = resolver or ModelResolver()
    info["cache_dir"] = str(resolver.cache_dir)
    models: dict[str, Any] = {}
    for role, ref in select_model_refs(configured).items():
        entry: dict[str, Any] = {"reference": ref, "env": ENV_VARS[role]}
        try:
            path = resolver.find_cached(ref)
        except QmdError as exc:
            entry.update(available=False, error=exc.message)
        else:
            entry.update(available=path is not None, path=str(path) if path else None)
        models[role] = entry
    info["models"] = {role: models[role] for role in ROLES}
    return info
