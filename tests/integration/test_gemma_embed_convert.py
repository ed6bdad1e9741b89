"""The torch-free EmbeddingGemma -> GGUF converter on a tiny random Gemma3 embedder written on
the fly, checked against the numpy forward pass (tooling/gemma_embed_reference.py): the
converter's mapping (norm shift, rope bases per layer kind, Dense layers, pooling, the
SentencePiece vocabulary) is proved without the real set, in every `models` run. The real
EmbeddingGemma is checked the same way in tests/integration/test_real_models.py.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.models

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, DENSE = 64, 2, 1, 32, 128, 128
# llama.cpp's gemma-embedding makes every sixth layer global, whatever the file says
LAYER_TYPES = ["sliding_attention"] * 5 + ["full_attention"]
TEXTS = ["the cat sat on the mat", "a dog ran far away.", "le chat dort sur le tapis"]


def write_tiny_gemma(folder: Path) -> None:
    import numpy as np
    import sentencepiece as spm
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    model = io.BytesIO()
    # Gemma's tokenizer is a byte-fallback BPE without the dummy space prefix
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXTS * 20 + ["the quick brown fox jumps over the lazy dog"] * 20),
        model_writer=model,
        model_type="bpe",
        vocab_size=300,
        byte_fallback=True,
        add_dummy_prefix=False,
        normalization_rule_name="identity",
        hard_vocab_limit=False,
    )
    (folder / "tokenizer.model").write_bytes(model.getvalue())
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    vocab = processor.vocab_size()
    config = {
        "architectures": ["Gemma3TextModel"],
        "model_type": "gemma3_text",
        "hidden_size": HIDDEN,
        "intermediate_size": FFN,
        "num_hidden_layers": len(LAYER_TYPES),
        "layer_types": LAYER_TYPES,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "query_pre_attn_scalar": HEAD_DIM,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1_000_000.0,
        "rope_local_base_freq": 10_000.0,
        "sliding_window": 512,
        "max_position_embeddings": 512,
        "vocab_size": vocab,
        "bos_token_id": processor.bos_id(),
        "eos_token_id": processor.eos_id(),
        "pad_token_id": 0,
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    tokenizer_config = {"add_bos_token": True, "add_eos_token": True}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config), encoding="utf-8")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    (folder / "1_Pooling").mkdir()
    pooling = json.dumps({"pooling_mode_mean_tokens": True})
    (folder / "1_Pooling" / "config.json").write_text(pooling, encoding="utf-8")

    rng = np.random.default_rng(34)

    def rand(*shape: int, scale: float = 0.2) -> Any:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    for name, (features_in, features_out) in {
        "2_Dense": (HIDDEN, DENSE),
        "3_Dense": (DENSE, HIDDEN),
    }.items():
        (folder / name).mkdir()
        dense = {"in_features": features_in, "out_features": features_out, "bias": False}
        (folder / name / "config.json").write_text(json.dumps(dense), encoding="utf-8")
        save_file(
            {"linear.weight": rand(features_out, features_in)},
            str(folder / name / "model.safetensors"),
        )
    tensors: dict[str, Any] = {
        "embed_tokens.weight": rand(vocab, HIDDEN),
        "norm.weight": rand(HIDDEN),
    }
    for i in range(len(LAYER_TYPES)):
        p = f"layers.{i}."
        for norm in (
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        ):
            tensors[p + norm + ".weight"] = rand(HIDDEN)
        tensors[p + "self_attn.q_proj.weight"] = rand(HEADS * HEAD_DIM, HIDDEN)
        tensors[p + "self_attn.k_proj.weight"] = rand(KV_HEADS * HEAD_DIM, HIDDEN)
        tensors[p + "self_attn.v_proj.weight"] = rand(KV_HEADS * HEAD_DIM, HIDDEN)
        tensors[p + "self_attn.o_proj.weight"] = rand(HIDDEN, HEADS * HEAD_DIM)
        tensors[p + "self_attn.q_norm.weight"] = rand(HEAD_DIM)
        tensors[p + "self_attn.k_norm.weight"] = rand(HEAD_DIM)
        tensors[p + "mlp.gate_proj.weight"] = rand(FFN, HIDDEN)
        tensors[p + "mlp.up_proj.weight"] = rand(FFN, HIDDEN)
        tensors[p + "mlp.down_proj.weight"] = rand(HIDDEN, FFN)
    save_file({"model." + k: v for k, v in tensors.items()}, str(folder / "model.safetensors"))


@pytest.mark.parametrize(("outtype", "floor"), [("f32", 0.9999), ("q8_0", 0.99)])
def test_the_converted_tiny_gemma_matches_the_numpy_forward_pass(
    tmp_path: Path, outtype: str, floor: float
) -> None:
    import llama_cpp
    import numpy as np

    from tooling.convert_gemma_embed import convert_gemma_embed
    from tooling.gemma_embed_reference import GemmaEmbedReference

    source = tmp_path / "tiny"
    write_tiny_gemma(source)
    summary = convert_gemma_embed(source, tmp_path / "tiny.gguf", outtype)
    assert (summary.output_length, summary.pooling) == (HIDDEN, "mean")
    assert summary.tensors == 2 + 2 + 13 * len(LAYER_TYPES)  # Dense, embeddings + norm, layers

    reference = GemmaEmbedReference(source)
    llm = llama_cpp.Llama(
        str(summary.output), embedding=True, n_ctx=128, n_threads=1, verbose=False
    )
    try:
        assert llm.metadata["general.architecture"] == "gemma-embedding"
        for text in TEXTS:
            assert llm.tokenize(text.encode(), add_bos=True, special=True) == reference.tokenize(
                text
            )
            got = np.array(llm.embed(text, normalize=True))
            assert float(got @ reference.embed(text)) >= floor, text
    finally:
        llm.close()


def test_a_checkpoint_llama_cpp_would_run_differently_is_refused(tmp_path: Path) -> None:
    from tooling.convert_gemma_embed import convert_gemma_embed

    (tmp_path / "config.json").write_text('{"architectures": ["BertModel"]}', encoding="utf-8")
    with pytest.raises(ValueError, match="not an EmbeddingGemma checkpoint"):
        convert_gemma_embed(tmp_path, tmp_path / "out.gguf")
    # global attention where llama.cpp would run a sliding layer: another model, silently
    config = {"architectures": ["Gemma3TextModel"], "num_hidden_layers": 3}
    config["layer_types"] = ["sliding_attention", "full_attention", "sliding_attention"]
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ValueError, match="every sixth layer"):
        convert_gemma_embed(tmp_path, tmp_path / "out.gguf")
    assert not list(tmp_path.glob("out.gguf*"))
