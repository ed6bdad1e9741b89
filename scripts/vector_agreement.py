#!/usr/bin/env python3
"""How far our EmbeddingGemma vectors are from the original's, under llama-cpp-python settings.

    .venv/bin/python scripts/vector_agreement.py ORIGINAL_INDEX [--model GGUF] [VARIANT ...]
    .venv/bin/python scripts/vector_agreement.py ORIGINAL_INDEX --other OTHER_INDEX

ORIGINAL_INDEX is the original 2.8.3's index.sqlite after its `qmd embed` (for example the
scratch of `scripts/record_real_cli_goldens.py --cases-only SCRATCH`). Every one-chunk document
in it is embedded again by llama-cpp-python as `title: <title> | text: <body>` (the original's
text for that chunk), and each variant's vectors are compared with the stored ones: cosine, the
largest difference relative to the vector's largest element, and how many are bit-identical
as float32. `--other` compares two original indexes instead (the same corpus embedded with
another build or CPU backend). ADR 0058 records what this measured.

A VARIANT is comma-separated settings: `mode=single` (one text per decode, as node-llama-cpp's
`getEmbeddingFor`) or `mode=batch` (our adapter's packed batches), `flash_attn=0|1`,
`n_ctx`, `n_batch`, `n_ubatch`, `n_threads`.
"""

from __future__ import annotations

import argparse
import math
import os
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.models.embed_text import format_document
from adapters.sqlite.driver import sqlite_vec_library
from domain.text import extract_title

DEFAULT_MODEL = Path(__file__).resolve().parent.parent / ".models" / "embeddinggemma-300M-Q8_0.gguf"
DEFAULT_VARIANTS = (
    "mode=batch,flash_attn=0",
    "mode=single,flash_attn=0",
    "mode=single,flash_attn=1",
)
Vector = list[float]


def _connect(index: Path) -> Any:
    try:
        import pysqlite3.dbapi2 as sqlite3
    except ImportError:
        import sqlite3
    library = sqlite_vec_library()
    if library is None:
        raise SystemExit("sqlite-vec is not installed")
    db = sqlite3.connect(str(index))
    db.enable_load_extension(True)
    db.load_extension(library)
    return db


def original_chunks(index: Path) -> dict[str, tuple[str, Vector]]:
    """hash -> (the text the original embedded, its stored vector), one-chunk documents only."""
    db = _connect(index)
    rows = db.execute(
        "SELECT d.hash, d.path, c.doc FROM documents d JOIN content c ON c.hash = d.hash "
        "JOIN content_vectors v ON v.hash = d.hash AND v.seq = 0 "
        "WHERE d.active = 1 AND v.total_chunks = 1 ORDER BY d.path"
    ).fetchall()
    out: dict[str, tuple[str, Vector]] = {}
    for digest, path, body in rows:
        blob = db.execute(
            "SELECT embedding FROM vectors_vec WHERE hash_seq = ?", (f"{digest}_0",)
        ).fetchone()[0]
        vector = list(struct.unpack(f"<{len(blob) // 4}f", blob))
        text = format_document("embeddinggemma", extract_title(body, path), body)
        out[digest] = (text, vector)
    return out


def embed(model: Path, texts: list[str], spec: str) -> tuple[list[Vector], float]:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import llama_cpp

    settings = dict(item.split("=", 1) for item in spec.split(",") if item)
    mode = settings.pop("mode", "single")
    kwargs: dict[str, Any] = {"n_ctx": 2048, "n_batch": 2048, "n_ubatch": 2048, "n_threads": 2}
    for key, value in settings.items():
        kwargs[key] = value == "1" if key == "flash_attn" else int(value)
    kwargs["n_threads_batch"] = kwargs["n_threads"]
    llm = llama_cpp.Llama(model_path=str(model), embedding=True, verbose=False, **kwargs)
    try:
        start = time.perf_counter()
        if mode == "single":
            vectors = [list(llm.embed([text], normalize=False)[0]) for text in texts]
        else:
            vectors = [list(v) for v in llm.embed(texts, normalize=False)]
        return vectors, time.perf_counter() - start
    finally:
        llm.close()


def agreement(ours: list[Vector], theirs: list[Vector]) -> str:
    cosines, spreads, identical = [], [], 0
    for a, b in zip(ours, theirs, strict=True):
        dot = sum(x * y for x, y in zip(a, b, strict=True))
        cosines.append(dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b)))
        spreads.append(max(abs(x - y) for x, y in zip(a, b, strict=True)) / max(map(abs, b)))
        as_f32 = struct.pack(f"<{len(a)}f", *a) == struct.pack(f"<{len(b)}f", *b)
        identical += as_f32
    return (
        f"cosine min {min(cosines):.8f} mean {sum(cosines) / len(cosines):.8f}, "
        f"max |diff|/max|x| {max(spreads):.2e}, bit-identical {identical}/{len(ours)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("variants", nargs="*", default=list(DEFAULT_VARIANTS))
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--other", type=Path, help="compare with a second original index")
    args = parser.parse_args()
    chunks = original_chunks(args.index)
    load = os.getloadavg()[0]
    print(f"{len(chunks)} one-chunk documents; load average (1 min) {load:.2f}")
    if args.other:
        other = original_chunks(args.other)
        shared = sorted(set(chunks) & set(other))
        print("the other index against the first: ", end="")
        print(agreement([other[h][1] for h in shared], [chunks[h][1] for h in shared]))
        return 0
    texts = [text for text, _ in chunks.values()]
    theirs = [vector for _, vector in chunks.values()]
    for spec in args.variants:
        ours, seconds = embed(args.model, texts, spec)
        rate = len(texts) / seconds
        print(f"{spec:40s} {rate:6.2f} docs/s  {agreement(ours, theirs)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
