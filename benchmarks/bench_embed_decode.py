"""Embedding throughput: texts packed into one llama.cpp decode, or one text per decode.

Our adapter packed up to 32 texts into one decode until ADR 0058's note (2026-11-29); it now
embeds one text per decode, as the original does. This times both ways on the same model and
texts: chunk-sized documents of the seeded speed corpus (benchmarks/corpus.py), formatted
`title: … | text: …` and cut to the context less 4 tokens, as `qmd embed` feeds them. The
two ways take turns for `--rounds` rounds; it prints documents per second and the load average.

    python -m benchmarks.bench_embed_decode --model .models/embeddinggemma-300M-Q8_0.gguf
    python -m benchmarks.bench_embed_decode --model .models/all-MiniLM-L6-v2-f16.gguf --docs 100
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import corpus as corpus_mod
from benchmarks.harness import REPO, load_average

PACKED = 32  # texts per decode in the adapter before the change


def texts_of(docs: int) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="bench-embed-decode-") as tmp:
        corpus = corpus_mod.generate(Path(tmp), docs=docs)
        out = []
        for relative in corpus.files:
            body = (Path(tmp) / relative).read_text(encoding="utf-8")
            out.append(f"title: {Path(relative).stem} | text: {body}")
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", type=Path, default=REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"
    )
    parser.add_argument("--docs", type=int, default=40)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import llama_cpp

    probe = llama_cpp.Llama(model_path=str(args.model), vocab_only=True, verbose=False)
    context = min(args.context, int(probe._model.n_ctx_train()) or args.context)
    limit = context - 4
    texts = []
    for text in texts_of(args.docs):
        tokens = probe.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if len(tokens) > limit:
            text = bytes(probe.detokenize(tokens[:limit])).decode("utf-8", errors="ignore")
        texts.append(text)
    probe.close()
    llm: Any = llama_cpp.Llama(
        model_path=str(args.model),
        embedding=True,
        n_ctx=context,
        n_batch=context,
        n_ubatch=context,
        n_threads=args.threads,
        verbose=False,
    )
    print(f"{args.model.name}: {len(texts)} documents, context {context}, {args.threads} threads")
    try:
        for round_ in range(1, args.rounds + 1):
            start = time.perf_counter()
            for first in range(0, len(texts), PACKED):
                llm.embed(texts[first : first + PACKED], normalize=True)
            packed = len(texts) / (time.perf_counter() - start)
            start = time.perf_counter()
            for text in texts:
                llm.embed([text], normalize=True)
            single = len(texts) / (time.perf_counter() - start)
            print(
                f"round {round_}: packed {packed:.2f} docs/s, one per decode {single:.2f} docs/s "
                f"({single / packed:.2f}x), load average (1 min) {load_average():.2f}",
                flush=True,
            )
    finally:
        llm.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
