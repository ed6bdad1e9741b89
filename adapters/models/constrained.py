"""Grammar-constrained generation that matches the grammar against the top-k candidates only.

llama-cpp-python's completion (0.3.x) puts the grammar sampler before top-k in its chain, so
every token the grammar is matched against the whole vocabulary (262k tokens for gemma-3,
151k for Qwen): with the expansion grammar that doubled the cost of a gemma-3 token. Here the
chain is split at the grammar: penalties and top-k narrow the candidates first, the grammar
rules out those it does not allow, and top-p, min-p, temperature and the seeded draw choose
among the rest. Only when the grammar allows none of the top-k is it matched against the
whole vocabulary (a fallback, counted), so a token is never drawn from nothing but -inf and
every token written matches the grammar, as before.

The prompt is tokenised, the samplers set and the output decoded as llama-cpp-python's
completion does, so the same query with the same seed writes the same text on every run.
numpy is imported when a generation first runs: a CLI call that never generates does not pay
for it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# llama-cpp-python's completion defaults for the samplers the expander does not set
MIN_P = 0.05
TYPICAL_P = 1.0
REPEAT_PENALTY = 1.0
FREQUENCY_PENALTY = 0.0
# A token cut at max_tokens in the middle of a UTF-8 character may be followed by the rest of
# it (llama-cpp-python's completion goes on until the character is whole); at most this many.
CHARACTER_TOKENS = 3


@dataclass(frozen=True)
class Sampling:
    temperature: float
    top_k: int
    top_p: float
    presence_penalty: float
    seed: int


@dataclass(frozen=True)
class Generated:
    text: str
    tokens: int  # tokens written (end-of-generation not counted)
    fallbacks: int  # tokens for which the grammar allowed none of the top-k candidates


def completion_prompt_tokens(llm: Any, prompt: str) -> list[int]:
    """`prompt`'s tokens as llama-cpp-python's completion builds them: BOS (or CLS) when the
    model adds one, special tokens parsed (chat markers), EOS (or SEP) when the model adds one."""
    model = llm._model
    cls, sep = int(model.token_cls()), int(model.token_sep())
    first = cls if cls != -1 else int(llm.token_bos())
    head = [first] if model.add_bos_token() and first != -1 else []
    last = sep if sep != -1 else int(llm.token_eos())
    tail = [last] if model.add_eos_token() or sep != -1 else []
    body = [int(t) for t in llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)]
    return head + body + tail


def _ends_mid_character(data: bytes) -> bool:
    """Whether `data` ends inside a multi-byte UTF-8 character."""
    for back, byte in enumerate(reversed(data[-3:]), start=1):
        if byte & 0xC0 == 0x80:  # a continuation byte: look further back for the lead
            continue
        width = 2 if byte >= 0xC0 and byte < 0xE0 else 3 if 0xE0 <= byte < 0xF0 else 4
        return byte >= 0xC0 and width > back
    return False


class _Candidates:
    """One token-data array over the whole vocabulary, refilled from the logits per draw."""

    def __init__(self, llama_cpp: Any, n_vocab: int) -> None:
        import numpy as np

        self._np = np
        dtype = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
        self._data = np.zeros(n_vocab, dtype=dtype)
        self._ids = np.arange(n_vocab, dtype=np.intc)
        self._n = n_vocab
        self.array = llama_cpp.llama_token_data_array(
            data=self._data.ctypes.data_as(llama_cpp.llama_token_data_p),
            size=n_vocab,
            selected=-1,
            sorted=False,
        )
        self.ref = ctypes.byref(self.array)

    def fill(self, logits: Any) -> None:
        self._data["id"] = self._ids
        self._data["logit"] = logits
        self._data["p"] = 0.0
        self.array.size, self.array.selected, self.array.sorted = self._n, -1, False

    def any_allowed(self) -> bool:
        """Whether a candidate is left that the grammar did not rule out (logit -inf)."""
        # read through the struct: a sampler may have narrowed or moved the array
        kept = self._np.ctypeslib.as_array(self.array.data, shape=(self.array.size,))
        return bool(self._np.isfinite(kept["logit"]).any())

    def selected(self) -> int:
        # read through the struct: a sampler may have narrowed the array
        return int(self.array.data[self.array.selected].id)


def _sampling_chains(llama_cpp: Any, llm: Any, sampling: Sampling) -> tuple[Any, Any]:
    """llama-cpp-python's completion samplers for these settings, split where the grammar goes:
    (penalties and top-k, the rest). Without top-k the grammar sees the whole vocabulary."""
    chains = [
        llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        for _ in range(2)
    ]
    narrow, choose = chains

    def add(chain: Any, sampler: Any) -> None:
        llama_cpp.llama_sampler_chain_add(chain, sampler)

    add(
        narrow,
        llama_cpp.llama_sampler_init_penalties(
            int(llm.n_vocab()),
            int(llm.last_n_tokens_size),
            REPEAT_PENALTY,
            FREQUENCY_PENALTY,
            sampling.presence_penalty,
        ),
    )
    if sampling.temperature < 0.0:
        add(choose, llama_cpp.llama_sampler_init_dist(sampling.seed))
    elif sampling.temperature == 0.0:
        add(choose, llama_cpp.llama_sampler_init_greedy())
    else:
        add(narrow, llama_cpp.llama_sampler_init_top_k(sampling.top_k))
        add(choose, llama_cpp.llama_sampler_init_typical(TYPICAL_P, 1))
        add(choose, llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
        add(choose, llama_cpp.llama_sampler_init_min_p(MIN_P, 1))
        add(choose, llama_cpp.llama_sampler_init_temp(sampling.temperature))
        add(choose, llama_cpp.llama_sampler_init_dist(sampling.seed))
    return narrow, choose


def generate_constrained(
    llama_cpp: Any,
    llm: Any,
    prompt: str,
    grammar: str,
    sampling: Sampling,
    *,
    max_tokens: int,
    line_tokens: int | None,
    stop_check: Callable[[], None],
) -> Generated:
    """Text for `prompt` from a fresh state, every token allowed by GBNF `grammar`.

    `stop_check` is asked before each token (it raises to give the generation up); a line that
    has run `line_tokens` tokens without a newline ends the generation, as does `max_tokens`.
    Raises ValueError if the prompt does not fit the context.
    """
    import numpy as np

    prompt_tokens = completion_prompt_tokens(llm, prompt)
    n_ctx = int(llm.n_ctx())
    if len(prompt_tokens) >= n_ctx:
        raise ValueError(f"the prompt's {len(prompt_tokens)} tokens exceed the context of {n_ctx}")
    room = n_ctx - len(prompt_tokens)  # tokens the context can still take
    vocab = llm._model.vocab
    n_vocab = int(llm.n_vocab())
    grammar_sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not grammar_sampler:
        raise ValueError("the grammar could not be parsed")
    narrow, choose = _sampling_chains(llama_cpp, llm, sampling)
    apply = llama_cpp.llama_sampler_apply
    try:
        candidates = _Candidates(llama_cpp, n_vocab)
        # a fresh state per call: the result must not depend on what was generated before
        llm.reset()
        llm.eval(prompt_tokens)
        written: list[int] = []
        fallbacks = run = 0
        while True:
            stop_check()
            logits = np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(n_vocab,)
            )
            candidates.fill(logits)
            apply(narrow, candidates.ref)
            apply(grammar_sampler, candidates.ref)
            # top-k left the array sorted, and the grammar's -inf broke the order the later
            # samplers would trust (top-p takes the first logit as the largest)
            candidates.array.sorted = False
            if not candidates.any_allowed():
                # none of the top-k fits: the grammar picks from the whole vocabulary first
                fallbacks += 1
                candidates.fill(logits)
                apply(grammar_sampler, candidates.ref)
                if not candidates.any_allowed():
                    break  # the grammar allows nothing more: end as at end-of-generation
                apply(narrow, candidates.ref)
            apply(choose, candidates.ref)
            token = candidates.selected()
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            for sampler in (grammar_sampler, narrow, choose):
                llama_cpp.llama_sampler_accept(sampler, token)
            written.append(token)
            run = 0 if b"\n" in bytes(llm.detokenize([token])) else run + 1
            if line_tokens is not None and run >= line_tokens:
                break
            if len(written) >= room:
                break
            if len(written) >= max_tokens and (
                len(written) >= max_tokens + CHARACTER_TOKENS
                or not _ends_mid_character(llm.detokenize(written, prev_tokens=prompt_tokens))
            ):
                break
            llm.eval([token])
        text = bytes(llm.detokenize(written, prev_tokens=prompt_tokens))
        return Generated(text.decode("utf-8", errors="ignore"), len(written), fallbacks)
    finally:
        for sampler in (narrow, choose, grammar_sampler):
            llama_cpp.llama_sampler_free(sampler)
