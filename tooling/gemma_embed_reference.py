"""EmbeddingGemma's forward pass in numpy, from the upstream F32 safetensors: the reference a
converted GGUF is compared with, as `tooling/bert_reference.py` is for BERT.

It follows transformers' `Gemma3TextModel` with bidirectional attention and
sentence-transformers' modules (mean pooling, two bias-free Dense layers, normalisation).
Texts are tokenised with the upstream SentencePiece model plus BOS and EOS, as the tokenizer
config asks. Only short texts (well inside the 512-token sliding window, where local and global
layers see the same tokens) are supported: enough to check a conversion.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

Array = np.ndarray[Any, Any]


def _rms_norm(x: Array, weight: Array, eps: float) -> Array:
    # Gemma3RMSNorm: the checkpoint stores w - 1
    scale = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    result: Array = x * scale * (1.0 + weight)
    return result


def _gelu_tanh(x: Array) -> Array:
    result: Array = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return result


def _rope(x: Array, base: float) -> Array:
    """Rotary embedding, transformers' rotate-half layout; x is (heads, tokens, head_dim)."""
    dim = x.shape[-1]
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    angles = np.arange(x.shape[1], dtype=np.float64)[:, None] * inv_freq[None, :]
    angles = np.concatenate([angles, angles], axis=-1)
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    half = dim // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    result: Array = x * cos + rotated * sin
    return result


class GemmaEmbedReference:
    def __init__(self, model_dir: Path) -> None:
        from sentencepiece import SentencePieceProcessor

        self.config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        self.weights = {
            k.removeprefix("model."): v.astype(np.float32)
            for k, v in load_file(str(model_dir / "model.safetensors")).items()
        }
        self.dense = [
            load_file(str(model_dir / folder / "model.safetensors"))["linear.weight"]
            for folder in ("2_Dense", "3_Dense")
        ]
        self.tokenizer = SentencePieceProcessor()
        self.tokenizer.LoadFromFile(str(model_dir / "tokenizer.model"))

    def tokenize(self, text: str) -> list[int]:
        bos, eos = int(self.config["bos_token_id"]), int(self.config["eos_token_id"])
        return [bos, *self.tokenizer.EncodeAsIds(text), eos]

    def _attention(self, i: int, h: Array, full: bool) -> Array:
        c, w = self.config, self.weights
        heads, kv_heads, head_dim = (
            int(c["num_attention_heads"]),
            int(c["num_key_value_heads"]),
            int(c["head_dim"]),
        )
        eps = float(c["rms_norm_eps"])
        p = f"layers.{i}.self_attn."
        tokens = h.shape[0]
        q = (h @ w[p + "q_proj.weight"].T).reshape(tokens, heads, head_dim).transpose(1, 0, 2)
        k = (h @ w[p + "k_proj.weight"].T).reshape(tokens, kv_heads, head_dim).transpose(1, 0, 2)
        v = (h @ w[p + "v_proj.weight"].T).reshape(tokens, kv_heads, head_dim).transpose(1, 0, 2)
        q = _rms_norm(q, w[p + "q_norm.weight"], eps)
        k = _rms_norm(k, w[p + "k_norm.weight"], eps)
        base = float(c["rope_theta"] if full else c["rope_local_base_freq"])
        q, k = _rope(q, base), _rope(k, base)
        group = heads // kv_heads
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
        scores = (q @ k.transpose(0, 2, 1)) * float(c["query_pre_attn_scalar"]) ** -0.5
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        out = (scores @ v).transpose(1, 0, 2).reshape(tokens, heads * head_dim)
        result: Array = out @ w[p + "o_proj.weight"].T
        return result

    def embed(self, text: str) -> Array:
        """The unit sentence vector sentence-transformers would give for `text`."""
        c, w = self.config, self.weights
        ids = self.tokenize(text)
        if len(ids) * 2 > int(c["sliding_window"]):
            raise ValueError("the reference handles only texts inside half the sliding window")
        eps = float(c["rms_norm_eps"])
        h = w["embed_tokens.weight"][ids] * np.float32(math.sqrt(int(c["hidden_size"])))
        for i, kind in enumerate(c["layer_types"]):
            p = f"layers.{i}."
            attn = self._attention(
                i, _rms_norm(h, w[p + "input_layernorm.weight"], eps), kind == "full_attention"
            )
            h = h + _rms_norm(attn, w[p + "post_attention_layernorm.weight"], eps)
            x = _rms_norm(h, w[p + "pre_feedforward_layernorm.weight"], eps)
            m = p + "mlp."
            x = _gelu_tanh(x @ w[m + "gate_proj.weight"].T) * (x @ w[m + "up_proj.weight"].T)
            x = x @ w[m + "down_proj.weight"].T
            h = h + _rms_norm(x, w[p + "post_feedforward_layernorm.weight"], eps)
        h = _rms_norm(h, w["norm.weight"], eps)
        pooled = h.mean(axis=0)
        for layer in self.dense:
            pooled = layer.astype(np.float32) @ pooled
        result: Array = pooled / np.linalg.norm(pooled)
        return result
