"""Model references: parsing, precedence, cache lookup, bounded downloads, clear failures."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from adapters.models.llama import describe_backend
from adapters.models.references import (
    DEFAULT_MODELS,
    ModelResolver,
    model_cache_dir,
    parse_model_ref,
    select_model_refs,
)
from domain.errors import INVALID_ARGUMENT, MODEL_UNAVAILABLE, QmdError

GGUF_BYTES = b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 56


def test_parse_hf_reference() -> None:
    ref = parse_model_ref("hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf")
    assert (ref.kind, ref.org, ref.repo) == ("hf", "ggml-org", "embeddinggemma-300M-GGUF")
    assert ref.file == ref.file_name == "embeddinggemma-300M-Q8_0.gguf"
    assert ref.revision == "main"
    nested = parse_model_ref("hf:org/repo/sub/dir/model.gguf#v2")
    assert (nested.file, nested.file_name, nested.revision) == (
        "sub/dir/model.gguf",
        "model.gguf",
        "v2",
    )


@pytest.mark.parametrize("text", ["hf:org/repo", "hf:org//x.gguf", "", "   "])
def test_malformed_references_are_invalid(text: str) -> None:
    with pytest.raises(QmdError) as raised:
        parse_model_ref(text)
    assert raised.value.code == INVALID_ARGUMENT


def test_other_references() -> None:
    assert parse_model_ref("https://example.org/m/x.gguf").kind == "url"
    assert parse_model_ref("https://example.org/m/x.gguf").file_name == "x.gguf"
    assert parse_model_ref("~/models/x.gguf").kind == "path"


def test_yaml_beats_env_beats_default() -> None:
    env = {"QMD_EMBED_MODEL": "/env/embed.gguf", "QMD_RERANK_MODEL": "/env/rerank.gguf"}
    chosen = select_model_refs({"embed": "/yaml/embed.gguf", "generate": ""}, env)
    assert chosen == {
        "embed": "/yaml/embed.gguf",
        "rerank": "/env/rerank.gguf",
        "generate": DEFAULT_MODELS["generate"],
    }
    assert select_model_refs(None, {}) == dict(DEFAULT_MODELS)


def test_model_cache_dir_follows_xdg() -> None:
    assert model_cache_dir({"XDG_CACHE_HOME": "/x/cache"}) == Path("/x/cache/qmd/models")
    assert model_cache_dir({}) == Path.home() / ".cache" / "qmd" / "models"


# ------------------------------------------------------------------------------ local files


def test_local_paths(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(GGUF_BYTES)
    resolver = ModelResolver(tmp_path / "cache", base_dir=tmp_path, allow_download=False)
    assert resolver.resolve(str(model), "embed") == model
    assert resolver.resolve("m.gguf", "embed") == model  # relative to base_dir

    (tmp_path / "page.gguf").write_text("<html>login</html>")
    for ref, reason in [("missing.gguf", "does not exist"), ("page.gguf", "not a GGUF")]:
        with pytest.raises(QmdError) as raised:
            resolver.resolve(ref, "embed")
        assert raised.value.code == MODEL_UNAVAILABLE
        assert reason in raised.value.message


def test_unavailable_message_says_how_to_provide_the_model(tmp_path: Path) -> None:
    resolver = ModelResolver(tmp_path, allow_download=False)
    with pytest.raises(QmdError) as raised:
        resolver.resolve(DEFAULT_MODELS["rerank"], "rerank")
    message = raised.value.message
    assert raised.value.code == MODEL_UNAVAILABLE
    assert DEFAULT_MODELS["rerank"] in message
    assert "QMD_RERANK_MODEL" in message
    assert "models:" in message and "index.yml" in message
    assert "scripts/prepare_models.py" in message


def test_hf_reference_found_in_cache_without_network(tmp_path: Path) -> None:
    cached = tmp_path / "hf_ggml-org_embeddinggemma-300M-Q8_0.gguf"
    cached.write_bytes(GGUF_BYTES)
    resolver = ModelResolver(tmp_path, allow_download=False)
    assert resolver.resolve(DEFAULT_MODELS["embed"], "embed") == cached
    assert resolver.find_cached(DEFAULT_MODELS["embed"]) == cached
    assert resolver.find_cached(DEFAULT_MODELS["generate"]) is None


# ------------------------------------------------------------------------------ downloads


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_hub_fails_fast(tmp_path: Path) -> None:
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}
    resolver = ModelResolver(tmp_path, env=env, connect_timeout=2.0)
    start = time.monotonic()
    with pytest.raises(QmdError) as raised:
        resolver.resolve("hf:org/repo/model.gguf", "generate")
    assert time.monotonic() - start < 5
    assert raised.value.code == MODEL_UNAVAILABLE
    assert "not reachable" in raised.value.message


def test_offline_mode_never_downloads(tmp_path: Path) -> None:
    resolver = ModelResolver(tmp_path, env={"QMD_OFFLINE": "1"})
    with pytest.raises(QmdError) as raised:
        resolver.resolve("hf:org/repo/model.gguf", "embed")
    assert "offline" in raised.value.message


class _Hub(http.server.BaseHTTPRequestHandler):
    files: ClassVar[dict[str, bytes]] = {}

    def do_GET(self) -> None:
        body = self.files.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body or b"not found")

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output clean


@pytest.fixture
def hub() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_download_into_cache_then_reuse(tmp_path: Path, hub: str) -> None:
    _Hub.files = {
        "/org/repo/resolve/main/good.gguf": GGUF_BYTES,
        "/org/repo/resolve/main/proxy.gguf": b"<!doctype html><p>sign in</p>",
    }
    resolver = ModelResolver(tmp_path, env={"HF_ENDPOINT": hub})
    path = resolver.resolve("hf:org/repo/good.gguf", "embed")
    assert path == tmp_path / "hf_org_good.gguf"
    assert path.read_bytes() == GGUF_BYTES
    offline = ModelResolver(tmp_path, allow_download=False)
    assert offline.resolve("hf:org/repo/good.gguf", "embed") == path

    for ref, reason in [
        ("hf:org/repo/proxy.gguf", "did not return a GGUF file"),
        ("hf:org/repo/absent.gguf", "download from"),
    ]:
        with pytest.raises(QmdError) as raised:
            resolver.resolve(ref, "embed")
        assert reason in raised.value.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf_org_good.gguf"]


def test_describe_backend_reports_without_downloading(tmp_path: Path) -> None:
    local = tmp_path / "e.gguf"
    local.write_bytes(GGUF_BYTES)
    configured = {"embed": str(local), "rerank": "hf:org/repo/r.gguf", "generate": "x.gguf"}
    info = describe_backend(configured, resolver=ModelResolver(tmp_path / "cache"))
    assert info["cache_dir"] == str(tmp_path / "cache")
    assert info["models"]["embed"] == {
        "reference": str(local),
        "env": "QMD_EMBED_MODEL",
        "available": True,
        "path": str(local),
    }
    assert info["models"]["rerank"]["available"] is False
    assert info["models"]["generate"]["available"] is False
    assert "llama_cpp" in info and "gpu_offload" in info
