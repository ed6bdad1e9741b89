"""Convert EmbeddingGemma (a sentence-transformers folder around a `Gemma3TextModel`) to GGUF.

The sibling of `tooling/convert_bert.py`, for the same reason: llama.cpp's
`convert_hf_to_gguf.py` needs torch + transformers to read a safetensors file, and what it
does for EmbeddingGemma is metadata, a rename, Gemma's norm shift and the two Dense
projections. gguf + safetensors + numpy + sentencepiece suffice; the output loads in
llama-cpp-python 0.3.x as the `gemma-embedding` architecture, which applies the mean pooling
and both Dense layers itself (`Llama(path, embedding=True).embed(...)` needs nothing else).

What llama.cpp expects, read from its converter (class `EmbeddingGemma`) and gguf-py:
- the SentencePiece vocabulary as a `llama` tokenizer (pieces, scores, token types), with the
  specials from `tokenizer_config.json` and no space prefix;
- every `*norm.weight` stored as `1 + w` (Gemma3RMSNorm keeps `w - 1` in the checkpoint);
- `sliding_window` as `config.json` states it (transformers adjusts the value it loads);
- the Dense layers as tensors `dense_2.weight` / `dense_3.weight` with their in/out sizes under
  `gemma-embedding.dense_2_feat_in` etc., and the pooling type from the Pooling module.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from safetensors import safe_open

from tooling.convert_bert import read_json, sentence_transformers_pooling

OUTTYPES = {
    "f32": (gguf.LlamaFileType.ALL_F32, gguf.GGMLQuantizationType.F32),
    "f16": (gguf.LlamaFileType.MOSTLY_F16, gguf.GGMLQuantizationType.F16),
    "q8_0": (gguf.LlamaFileType.MOSTLY_Q8_0, gguf.GGMLQuantizationType.Q8_0),
}
ARCH = gguf.MODEL_ARCH.GEMMA_EMBEDDING
ARCH_NAME = gguf.MODEL_ARCH_NAMES[ARCH]
# The sentence-transformers module folders and the GGUF tensor prefix llama.cpp reads each as.
DENSE_PREFIXES = {"2_Dense": "dense_2", "3_Dense": "dense_3"}


@dataclass(frozen=True)
class ConversionSummary:
    output: Path
    tensors: int
    vocab_size: int
    embedding_length: int
    output_length: int
    pooling: str
    outtype: str


def _looks_special(token: str) -> bool:
    # Gemma's tokenizer_config marks some control pieces only by their shape.
    return (
        token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
        or (token.startswith("<|") and token.endswith("|>"))
        or (token.startswith("<unused") and token.endswith(">"))
    )


def read_vocab(model_dir: Path, vocab_size: int) -> tuple[list[bytes], list[float], list[int]]:
    """Pieces, scores and llama.cpp token types by id, the way llama.cpp's converter builds them
    for a SentencePiece model (`_set_vocab_sentencepiece`)."""
    from sentencepiece import SentencePieceProcessor

    processor = SentencePieceProcessor()
    processor.LoadFromFile(str(model_dir / "tokenizer.model"))
    tokens = [f"[PAD{i}]".encode() for i in range(vocab_size)]
    scores = [-10000.0] * vocab_size
    types = [int(gguf.TokenType.UNUSED)] * vocab_size
    for i in range(min(processor.vocab_size(), vocab_size)):
        kind = gguf.TokenType.NORMAL
        if processor.IsUnknown(i):
            kind = gguf.TokenType.UNKNOWN
        elif processor.IsControl(i):
            kind = gguf.TokenType.CONTROL
        elif processor.IsUnused(i):
            kind = gguf.TokenType.UNUSED
        elif processor.IsByte(i):
            kind = gguf.TokenType.BYTE
        tokens[i] = processor.IdToPiece(i).encode("utf-8")
        scores[i] = float(processor.GetScore(i))
        types[i] = int(kind)
    added = model_dir / "added_tokens.json"
    if added.is_file():
        for piece, i in read_json(added).items():
            if i < vocab_size:
                tokens[i], scores[i] = piece.encode("utf-8"), -1000.0
                types[i] = int(gguf.TokenType.USER_DEFINED)
    config = model_dir / "tokenizer_config.json"
    decoder = read_json(config).get("added_tokens_decoder", {}) if config.is_file() else {}
    for key, data in decoder.items():
        i = int(key)
        if i >= vocab_size:
            continue
        piece = str(data["content"])
        if data.get("special") or _looks_special(piece):
            types[i] = int(gguf.TokenType.CONTROL)
        else:
            piece = piece.replace("\u2581", " ")
            types[i] = int(gguf.TokenType.USER_DEFINED)
        tokens[i], scores[i] = piece.encode("utf-8"), -1000.0
    return tokens, scores, types


def _dense_modules(model_dir: Path) -> list[tuple[str, Path, int, int]]:
    """(GGUF prefix, safetensors file, in features, out features) per Dense module, in order."""
    found = []
    for module in read_json(model_dir / "modules.json"):
        if str(module.get("type", "")).endswith("Dense"):
            folder = str(module["path"])
            if folder not in DENSE_PREFIXES:
                raise ValueError(f"unexpected Dense module folder {folder!r}")
            config = read_json(model_dir / folder / "config.json")
            if config.get("bias"):
                raise ValueError(f"{folder} has a bias, which llama.cpp's gemma-embedding ignores")
            found.append(
                (
                    DENSE_PREFIXES[folder],
                    model_dir / folder / "model.safetensors",
                    int(config["in_features"]),
                    int(config["out_features"]),
                )
            )
    return found


def _tensors(path: Path) -> Iterator[tuple[str, np.ndarray[Any, Any]]]:
    # One tensor at a time: the F32 checkpoint is 1.2 GB, its largest tensor 0.8 GB.
    with safe_open(str(path), framework="numpy") as handle:
        for key in sorted(handle.keys()):
            yield key, handle.get_tensor(key)


def _target_type(array: np.ndarray[Any, Any], wanted: gguf.GGMLQuantizationType) -> Any:
    if array.ndim <= 1:
        return gguf.GGMLQuantizationType.F32  # norms: llama.cpp adds them to activations as f32
    if wanted == gguf.GGMLQuantizationType.Q8_0 and array.shape[-1] % 32 != 0:
        return gguf.GGMLQuantizationType.F16  # Q8_0 blocks are 32 wide
    return wanted


def convert_gemma_embed(model_dir: Path, output: Path, outtype: str = "q8_0") -> ConversionSummary:
    """Write `output` (atomically: temp file + rename) from the sentence-transformers folder."""
    if outtype not in OUTTYPES:
        raise ValueError(f"outtype must be one of {sorted(OUTTYPES)}, not {outtype!r}")
    file_type, wanted = OUTTYPES[outtype]
    config = read_json(model_dir / "config.json")
    if config.get("architectures") != ["Gemma3TextModel"]:
        raise ValueError(f"not an EmbeddingGemma checkpoint: {config.get('architectures')!r}")
    n_layers = int(config["num_hidden_layers"])
    # llama.cpp does not read the layer kinds: its gemma-embedding makes every sixth layer
    # global (rope_theta) and the rest sliding (rope_local_base_freq)
    expected = ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(n_layers)]
    if config.get("layer_types", expected) != expected:
        raise ValueError(
            "llama.cpp's gemma-embedding runs every sixth layer with global attention; "
            f"this checkpoint's layer_types differ: {config['layer_types']}"
        )
    vocab_size = int(config["vocab_size"])
    head_dim = int(config.get("head_dim", 256))
    pooling = sentence_transformers_pooling(model_dir)
    dense = _dense_modules(model_dir)
    tokens, scores, types = read_vocab(model_dir, vocab_size)

    output.parent.mkdir(parents=True, exist_ok=True)
    temp = output.with_name(output.name + f".tmp{os.getpid()}")
    writer = gguf.GGUFWriter(str(temp), ARCH_NAME)
    count = 0
    try:
        writer.add_name("EmbeddingGemma 300m")
        writer.add_block_count(n_layers)
        writer.add_context_length(int(config.get("max_position_embeddings", 2048)))
        writer.add_embedding_length(int(config["hidden_size"]))
        writer.add_feed_forward_length(int(config["intermediate_size"]))
        writer.add_head_count(int(config["num_attention_heads"]))
        writer.add_head_count_kv(int(config["num_key_value_heads"]))
        writer.add_rope_freq_base(float(config.get("rope_theta", 1_000_000.0)))
        writer.add_key_value(
            f"{ARCH_NAME}.rope.freq_base_swa",
            float(config.get("rope_local_base_freq", 10_000.0)),
            gguf.GGUFValueType.FLOAT32,
        )
        writer.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
        writer.add_file_type(int(file_type))
        writer.add_sliding_window(int(config["sliding_window"]))
        for prefix, _, features_in, features_out in dense:
            writer.add_dense_features_dims(prefix, features_in, features_out)
        writer.add_pooling_type(pooling)

        writer.add_tokenizer_model("llama")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        # bos/eos/pad/unk ids and add_bos/add_eos, as tokenizer_config.json states them
        gguf.SpecialVocab(model_dir, n_vocab=len(tokens)).add_to_gguf(writer)
        writer.add_add_space_prefix(False)

        names = gguf.get_tensor_name_map(ARCH, n_layers)

        def put(name: str, array: np.ndarray[Any, Any]) -> None:
            nonlocal count
            data = array.astype(np.float32)
            qtype = _target_type(data, wanted)
            writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
            count += 1

        for prefix, path, _, _ in dense:
            for key, array in _tensors(path):
                if key != "linear.weight":
                    raise ValueError(f"unexpected tensor {key!r} in {path.parent.name}")
                put(f"{prefix}.weight", array)
        for key, array in _tensors(model_dir / "model.safetensors"):
            short = key.removeprefix("model.")
            if short.endswith("norm.weight"):
                array = array.astype(np.float32) + 1.0
            if short.startswith("embed_tokens."):
                array = array[: len(tokens)]
            name = names.get_name(short, try_suffixes=(".weight", ".bias"))
            if name is None:
                raise ValueError(f"no GGUF name for tensor {key!r}")
            put(str(name), array)

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
        output_length=dense[-1][3] if dense else int(config["hidden_size"]),
        pooling=pooling.name.lower(),
        outtype=outtype,
    )
