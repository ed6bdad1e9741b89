"""Convert a Hugging Face BERT sentence-embedding model (safetensors) to a llama.cpp GGUF file.

Why our own converter: llama.cpp's `convert_hf_to_gguf.py` needs torch + transformers (~6 GB
with CUDA wheels) just to read a 90 MB safetensors file and a WordPiece vocabulary. Everything
it does for BERT is plain metadata plus a tensor rename, so `gguf` + `safetensors` + numpy
suffice. The output loads with `llama_cpp.Llama(path, embedding=True)`.

Only the BERT family (`BertModel`, e.g. all-MiniLM-L6-v2) is supported: WordPiece vocabulary,
absolute position embeddings, post-norm encoder, mean/CLS pooling from sentence-transformers'
`modules.json`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from safetensors.numpy import load_file

OUTTYPES = {
    "f32": (gguf.LlamaFileType.ALL_F32, gguf.GGMLQuantizationType.F32),
    "f16": (gguf.LlamaFileType.MOSTLY_F16, gguf.GGMLQuantizationType.F16),
    "q8_0": (gguf.LlamaFileType.MOSTLY_Q8_0, gguf.GGMLQuantizationType.Q8_0),
}

# Tensors llama.cpp reads as f32 whatever the file type (it adds them to activations directly).
_ALWAYS_F32 = ("position_embd.weight", "token_types.weight")
# Parts of the checkpoint an embedding-only model does not use.
_DROPPED_PREFIXES = ("pooler.", "cls.")
_DROPPED = ("embeddings.position_ids",)


@dataclass(frozen=True)
class ConversionSummary:
    output: Path
    tensors: int
    vocab_size: int
    embedding_length: int
    context_length: int
    pooling: str
    outtype: str


def read_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return json.load(handle)


def read_vocab(model_dir: Path) -> tuple[list[str], set[str]]:
    """Token strings by id and the set of special (control) tokens.

    `tokenizer.json` is preferred because it marks specials explicitly; `vocab.txt` (one token
    per line, id = line number) is the fallback older checkpoints ship.
    """
    tokenizer_json = model_dir / "tokenizer.json"
    specials: set[str] = set()
    if tokenizer_json.is_file():
        data = read_json(tokenizer_json)
        model = data.get("model", {})
        if model.get("type") != "WordPiece":
            raise ValueError(f"expected a WordPiece tokenizer, found {model.get('type')!r}")
        by_id: dict[int, str] = {int(i): tok for tok, i in model["vocab"].items()}
        for added in data.get("added_tokens", []):
            by_id[int(added["id"])] = added["content"]
            if added.get("special"):
                specials.add(added["content"])
    else:
        lines = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
        by_id = dict(enumerate(lines))
    size = max(by_id) + 1
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(size)]
    special_map = model_dir / "special_tokens_map.json"
    if special_map.is_file():
        for value in read_json(special_map).values():
            specials.add(value["content"] if isinstance(value, dict) else str(value))
    return tokens, specials


def sentence_transformers_pooling(model_dir: Path) -> gguf.PoolingType:
    """Pooling as sentence-transformers configures it; BERT checkpoints without one use CLS."""
    modules_path = model_dir / "modules.json"
    if modules_path.is_file():
        for module in read_json(modules_path):
            if str(module.get("type", "")).endswith("Pooling"):
                config = read_json(model_dir / module["path"] / "config.json")
                if config.get("pooling_mode_mean_tokens") or config.get("pooling_mode") == "mean":
                    return gguf.PoolingType.MEAN
                if config.get("pooling_mode_cls_token") or config.get("pooling_mode") == "cls":
                    return gguf.PoolingType.CLS
                if (
                    config.get("pooling_mode_lasttoken")
                    or config.get("pooling_mode") == "lasttoken"
                ):
                    return gguf.PoolingType.LAST
                raise ValueError(f"unsupported pooling config in {module['path']}: {config}")
    return gguf.PoolingType.CLS


def _tensor_name(hf_name: str, names: gguf.TensorNameMap) -> str | None:
    name = hf_name.removeprefix("bert.")
    if name in _DROPPED or name.startswith(_DROPPED_PREFIXES):
        return None
    # Very old checkpoints name LayerNorm parameters gamma/beta.
    if name.endswith(".gamma"):
        name = name[: -len(".gamma")] + ".weight"
    elif name.endswith(".beta"):
        name = name[: -len(".beta")] + ".bias"
    mapped = names.get_name(name, try_suffixes=(".weight", ".bias"))
    if mapped is None:
        raise ValueError(f"no GGUF name for tensor {hf_name!r}")
    return str(mapped)


def _target_type(name: str, array: np.ndarray[Any, Any], wanted: gguf.GGMLQuantizationType) -> Any:
    if array.ndim <= 1 or name.endswith(_ALWAYS_F32) or name.endswith("_norm.weight"):
        return gguf.GGMLQuantizationType.F32
    if wanted == gguf.GGMLQuantizationType.Q8_0 and array.shape[-1] % 32 != 0:
        # Q8_0 blocks are 32 wide; a row that does not divide falls back to f16.
        return gguf.GGMLQuantizationType.F16
    return wanted


def convert_bert(model_dir: Path, output: Path, outtype: str = "f16") -> ConversionSummary:
    """Write `output` (atomically: temp file + rename) from the checkpoint in `model_dir`."""
    if outtype not in OUTTYPES:
        raise ValueError(f"outtype must be one of {sorted(OUTTYPES)}, not {outtype!r}")
    file_type, wanted = OUTTYPES[outtype]
    config = read_json(model_dir / "config.json")
    if config.get("model_type") != "bert":
        raise ValueError(f"not a BERT checkpoint: model_type={config.get('model_type')!r}")

    tokens, specials = read_vocab(model_dir)
    vocab_size = max(len(tokens), int(config.get("vocab_size", 0)))
    tokens += [f"[PAD{i}]" for i in range(len(tokens), vocab_size)]
    token_ids = {tok: i for i, tok in enumerate(tokens)}
    token_types: list[int] = []
    gguf_tokens: list[str] = []
    for tok in tokens:
        if tok in specials:
            token_types.append(int(gguf.TokenType.CONTROL))
            gguf_tokens.append(tok)
        else:
            token_types.append(
                int(gguf.TokenType.UNUSED if tok.startswith("[PAD") else gguf.TokenType.NORMAL)
            )
            # llama.cpp's WordPiece keeps word starts with a "▁" prefix and continuations bare,
            # the reverse of the HF "##" convention.
            gguf_tokens.append(tok[2:] if tok.startswith("##") else "\u2581" + tok)

    n_layers = int(config["num_hidden_layers"])
    pooling = sentence_transformers_pooling(model_dir)
    output.parent.mkdir(parents=True, exist_ok=True)
    temp = output.with_name(output.name + f".tmp{os.getpid()}")
    writer = gguf.GGUFWriter(str(temp), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    try:
        writer.add_name(str(config.get("_name_or_path") or model_dir.name))
        writer.add_context_length(int(config["max_position_embeddings"]))
        writer.add_embedding_length(int(config["hidden_size"]))
        writer.add_feed_forward_length(int(config["intermediate_size"]))
        writer.add_block_count(n_layers)
        writer.add_head_count(int(config["num_attention_heads"]))
        writer.add_layer_norm_eps(float(config.get("layer_norm_eps", 1e-12)))
        writer.add_causal_attention(False)
        writer.add_pooling_type(pooling)
        writer.add_file_type(int(file_type))

        writer.add_tokenizer_model("bert")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(gguf_tokens)
        writer.add_token_types(token_types)
        # WordPiece has no merge scores; llama.cpp accepts a flat list.
        writer.add_token_scores([0.0] * len(gguf_tokens))
        writer.add_token_type_count(int(config.get("type_vocab_size", 1)))
        # [CLS] is what llama.cpp calls BOS for BERT; [SEP] closes every sequence.
        for setter, token in (
            (writer.add_bos_token_id, "[CLS]"),
            (writer.add_sep_token_id, "[SEP]"),
            (writer.add_unk_token_id, "[UNK]"),
            (writer.add_pad_token_id, "[PAD]"),
            (writer.add_mask_token_id, "[MASK]"),
        ):
            if token in token_ids:
                setter(token_ids[token])
        writer.add_add_bos_token(True)
        writer.add_add_sep_token(True)
        writer.add_add_eos_token(False)

        names = gguf.TensorNameMap(gguf.MODEL_ARCH.BERT, n_layers)
        weights = load_file(str(model_dir / "model.safetensors"))
        count = 0
        for hf_name in sorted(weights):
            name = _tensor_name(hf_name, names)
            if name is None:
                continue
            array = weights[hf_name].astype(np.float32)
            qtype = _target_type(name, array, wanted)
            writer.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
            count += 1

        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    except BaseException:
        writer.close()
        temp.unlink(missing_ok=True)
        raise
    writer.close()
    os.replace(temp, output)
    return ConversionSummary(
        output=output,
        tensors=count,
        vocab_size=vocab_size,
        embedding_length=int(config["hidden_size"]),
        context_length=int(config["max_position_embeddings"]),
        pooling=pooling.name.lower(),
        outtype=outtype,
    )
