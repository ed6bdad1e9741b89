"""A tiny numpy BERT encoder used as an independent oracle for the GGUF conversion.

It reads the original safetensors weights directly, so agreement between its mean-pooled output
and llama.cpp's embedding of the converted GGUF shows the tensor mapping, layer norms and pooling
survived the conversion. Slow and unbatched on purpose: it exists for checks, not for search.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from tooling.convert_bert import read_json, read_vocab

Array = np.ndarray[Any, np.dtype[np.float64]]

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normed: Array = (x - mean) / np.sqrt(var + eps) * weight + bias
    return normed


def _gelu(x: Array) -> Array:
    out: Array = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    return out


class BertReference:
    """Mean-pooled, L2-normalised sentence embeddings straight from safetensors."""

    def __init__(self, model_dir: Path) -> None:
        self.config: dict[str, Any] = read_json(model_dir / "config.json")
        raw = load_file(str(model_dir / "model.safetensors"))
        self.w: dict[str, Array] = {
            k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items()
        }
        tokens, specials = read_vocab(model_dir)
        self.vocab = {tok: i for i, tok in enumerate(tokens)}
        self.specials = specials

    # A minimal uncased BERT tokenizer (basic split + greedy WordPiece); enough for ASCII prose.
    def tokenize(self, text: str) -> list[int]:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
        words: list[str] = []
        current = ""
        for ch in text:
            if ch.isspace():
                if current:
                    words.append(current)
                current = ""
            elif unicodedata.category(ch).startswith("P") or (ch.isascii() and not ch.isalnum()):
                if current:
                    words.append(current)
                words.append(ch)
                current = ""
            else:
                current += ch
        if current:
            words.append(current)
        ids = [self.vocab["[CLS]"]]
        for word in words:
            start, pieces = 0, []
            while start < len(word):
                end = len(word)
                while end > start:
                    piece = word[start:end] if start == 0 else "##" + word[start:end]
                    if piece in self.vocab:
                        pieces.append(self.vocab[piece])
                        break
                    end -= 1
                if end == start:
                    pieces = [self.vocab["[UNK]"]]
                    break
                start = end
            ids.extend(pieces)
        ids.append(self.vocab["[SEP]"])
        return ids

    def encode_ids(self, ids: Sequence[int]) -> Array:
        c, w = self.config, self.w
        eps = float(c.get("layer_norm_eps", 1e-12))
        heads = int(c["num_attention_heads"])
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][list(ids)]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        dim = x.shape[-1] // heads
        for layer in range(int(c["num_hidden_layers"])):
            p = f"encoder.layer.{layer}."

            def dense(v: Array, name: str, p: str = p) -> Array:
                out: Array = v @ w[p + name + ".weight"].T + w[p + name + ".bias"]
                return out

            q = dense(x, "attention.self.query").reshape(n, heads, dim).transpose(1, 0, 2)
            k = dense(x, "attention.self.key").reshape(n, heads, dim).transpose(1, 0, 2)
            v = dense(x, "attention.self.value").reshape(n, heads, dim).transpose(1, 0, 2)
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(dim)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, heads * dim)
            x = _layer_norm(
                x + dense(context, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                eps,
            )
            hidden = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(
                x + dense(hidden, "output.dense"),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                eps,
            )
        pooled: Array = x.mean(axis=0)
        normalised: Array = pooled / np.linalg.norm(pooled)
        return normalised

    def embed(self, text: str) -> Array:
        return self.encode_ids(self.tokenize(text))
