"""Grammar-constrained generation that checks the grammar against the sampled token only.

llama-cpp-python's completion (0.3.x) puts the grammar sampler before top-k in its chain, so
every token the grammar is matched against the whole vocabulary (262k tokens for gemma-3,
151k for Qwen): with the expansion grammar that more than doubled the cost of a token. Here,
as llama.cpp's own common sampler does, the chain (penalties, top-k, typical, top-p, min-p,
temperature, seeded draw) samples first without the grammar; only the chosen token is checked
against it. If the grammar rejects that token, the grammar is applied to the whole candidate
array and the chain samples again from what it allows. Either way the final token is accepted
by both, so every token written matches the grammar, as before.

The prompt is tokenised, the sampler chain built and the output decoded as llama-cpp-python's
completion does; only the grammar's place differs, so the same query with the same seed still
writes the same text on every run. numpy is imported when a generation first runs: a CLI call
that never generates does not pay for it.
"""

from __future__ import annotations

import ctypes
import math
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
    fallbacks: int  # tokens whose unconstrained draw the grammar rejected (sampled again)


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
        return bool(self._np.isfinite(self._data["logit"][: self.array.size]).any())

    def selected(self) -> int:
        # read through the struct: a sampler may have narrowed the array
        return int(self.array.data[self.array.selected].id)


class _GrammarCheck:
    """Asks the grammar sampler about one token, as a one-candidate array."""

    def __init__(self, llama_cpp: Any, grammar: Any) -> None:
        self._llama_cpp = llama_cpp
        self._grammar = grammar
        self._one = (llama_cpp.llama_token_data * 1)()
        self._array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._one, llama_cpp.llama_token_data_p),
            size=1,
            selected=-1,
            sorted=False,
        )

    def allows(self, token: int) -> bool:
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 1.0, 0.0
        self._array.size, self._array.selected, self._array.sorted = 1, -1, False
        self._llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(self._array))
        return math.isfinite(self._one[0].logit)


def _sampling_chain(llama_cpp: Any, llm: Any, sampling: Sampling) -> Any:
    """llama-cpp-python's completion chain for these settings, without the grammar."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())

    def add(sampler: Any) -> None:
        llama_cpp.llama_sampler_chain_add(chain, sampler)

    add(
        llama_cpp.llama_sampler_init_penalties(
            int(llm.n_vocab()),
            int(llm.last_n_tokens_size),
            REPEAT_PENALTY,
            FREQUENCY_PENALTY,
            sampling.presence_penalty,
        )
    )
    if sampling.temperature < 0.0:
        add(llama_cpp.llama_sampler_init_dist(sampling.seed))
    elif sampling.temperature == 0.0:
        add(llama_cpp.llama_sampler_init_greedy())
    else:
        add(llama_cpp.llama_sampler_init_top_k(sampling.top_k))
        add(llama_cpp.llama_sampler_init_typical(TYPICAL_P, 1))
        add(llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
        add(llama_cpp.llama_sampler_init_min_p(MIN_P, 1))
        add(llama_cpp.llama_sampler_init_temp(sampling.temperature))
        add(llama_cpp.llama_sampler_init_dist(sampling.seed))
    return chain


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
    chain = _sampling_chain(llama_cpp, llm, sampling)
    try:
        candidates = _Candidates(llama_cpp, n_vocab)
        check = _GrammarCheck(llama_cpp, grammar_sampler)
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
            llama_cpp.llama_sampler_apply(chain, candidates.ref)
            token = candidates.selected()
            if not check.allows(token):
                fallbacks += 1
                candidates.fill(logits)
                llama_cpp.llama_sampler_apply(grammar_sampler, candidates.ref)
                if not candidates.any_allowed():
                    break  # the grammar allows nothing more: end as at end-of-generation
                llama_cpp.llama_sampler_apply(chain, candidates.ref)
                token = candidates.selected()
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                break
            llama_cpp.llama_sampler_accept(grammar_sampler, token)
            llama_cpp.llama_sampler_accept(chain, token)
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
        llama_cpp.llama_sampler_free(chain)
        llama_cpp.llama_sampler_free(grammar_sampler)
