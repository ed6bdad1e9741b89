"""What the expansion grammar costs per token: llama-cpp-python's completion with the grammar
(the expander before the change: grammar before top-k, matched against the whole vocabulary
every token), the same completion without a grammar, and the expander's generation now (the
grammar matched against the top-k candidates; adapters/models/constrained.py).

The three ways take turns on one loaded model, for `--rounds` rounds, with the expander's
prompt and sampling settings; it prints CPU and wall milliseconds per written token, the
prompts' own evaluation (timed apart each round) taken out, and the 1-minute load average
beside each row. The ways may write different numbers of tokens (a model may end sooner).

    python -m benchmarks.bench_expand_grammar --model .models/gemma-3-270m-q4_k_m.gguf
    python -m benchmarks.bench_expand_grammar \
        --model .models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.models.constrained import completion_prompt_tokens, generate_constrained
from adapters.models.idle import never_given_up
from adapters.models.llama import (
    EXPAND_GRAMMAR,
    EXPAND_PROMPT,
    LlamaQueryExpander,
    chat_prompt,
    import_llama_cpp,
)
from benchmarks.harness import REPO, load_average

QUERIES = ["how to remove a directory", "sqlite vector search", "rate limiter for an http api"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / ".models" / "gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--tokens", type=int, default=60, help="max_tokens per generation")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    llama_cpp = import_llama_cpp()
    expander = LlamaQueryExpander(str(args.model), n_threads=args.threads, line_tokens=None)
    llm = expander.resident.get()
    grammar = llama_cpp.LlamaGrammar.from_string(EXPAND_GRAMMAR, verbose=False)
    template = str(llm.metadata.get("tokenizer.chat_template", ""))
    s = expander.sampling
    sampling = {
        "temperature": s.temperature,
        "top_k": s.top_k,
        "top_p": s.top_p,
        "presence_penalty": s.presence_penalty,
        "seed": s.seed,
    }

    def completion(with_grammar: bool) -> Callable[[str], int]:
        def run(prompt: str) -> int:
            llm.reset()
            out: Any = llm(
                prompt,
                max_tokens=args.tokens,
                grammar=grammar if with_grammar else None,
                **sampling,
            )
            return int(out["usage"]["completion_tokens"])

        return run

    def constrained(prompt: str) -> int:
        done = generate_constrained(
            llama_cpp,
            llm,
            prompt,
            EXPAND_GRAMMAR,
            s,
            max_tokens=args.tokens,
            line_tokens=None,
            stop_check=never_given_up,
        )
        fallbacks[0] += done.fallbacks
        return done.tokens

    fallbacks = [0]
    ways = {
        "completion, grammar first (before)": completion(True),
        "completion, no grammar": completion(False),
        "grammar after top-k (now)": constrained,
    }
    totals = {name: [0.0, 0.0, 0] for name in ways}
    prompts = [chat_prompt(template, EXPAND_PROMPT.format(query=q)) for q in QUERIES]
    print(f"model {args.model.name}, {args.threads} threads, max_tokens {args.tokens}")
    prompt_tokens = [completion_prompt_tokens(llm, p) for p in prompts]
    for round_no in range(args.rounds):
        cpu, wall = time.process_time(), time.perf_counter()
        for tokens_of_prompt in prompt_tokens:
            llm.reset()
            llm.eval(tokens_of_prompt)
        prompt_cpu, prompt_wall = time.process_time() - cpu, time.perf_counter() - wall
        print(f"round {round_no + 1} prompts alone: {prompt_cpu:.2f} CPU s {prompt_wall:.2f} s")
        for name, way in ways.items():
            cpu, wall, tokens = time.process_time(), time.perf_counter(), 0
            for prompt in prompts:
                tokens += way(prompt)
            cpu = time.process_time() - cpu - prompt_cpu
            wall = time.perf_counter() - wall - prompt_wall
            total = totals[name]
            total[0], total[1], total[2] = total[0] + cpu, total[1] + wall, int(total[2]) + tokens
            print(
                f"round {round_no + 1} {name:36s} {tokens:4d} tokens "
                f"{cpu / tokens * 1000:7.1f} CPU ms/token "
                f"{wall / tokens * 1000:7.1f} wall ms/token load {load_average():.2f}"
            )
    for name, (cpu, wall, tokens) in totals.items():
        print(
            f"total {name:36s} {int(tokens):4d} tokens {cpu / tokens * 1000:7.1f} CPU ms/token "
            f"{wall / tokens * 1000:7.1f} wall ms/token"
        )
    written = int(totals["grammar after top-k (now)"][2])
    print(f"grammar fallbacks (now): {fallbacks[0]} in {written} tokens")
    expander.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
