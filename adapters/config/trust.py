"""The approval gate for a project-local `.qmd/index.yml` (as the original's `qmd trust`).

A `.qmd/index.yml` arrives with a `git clone` and is adopted by any command run inside the
tree. Three of its fields reach outside the project, so they are somebody else's choices until
the user approves them:

- `update:` — a shell command `qmd update` runs;
- a collection `path` outside the project (the folder holding `.qmd`): any readable folder;
- `models:` other than the built-in defaults: any GGUF file or download.

Your own config (`~/.config/qmd/*.yml`, `--index NAME`) is never gated. Approvals are kept
per config file in `<config dir>/trusted.json` as a sha256 digest of the gated set, computed
exactly as the original does, so editing a hook, an outside path or a custom model re-arms
the gate and the two implementations share one trust file. `QMD_TRUST_LOCAL_CONFIG=1` (or
`QMD_TRUST_UPDATE_HOOKS=1`) trusts unattended runs.

The same file keeps the approvals of working-folder `.env` files (`qmd trust FILE`,
REQ-SEC-ENV-003): keyed by the file's absolute path, as the sha256 of its bytes under `env`
(the original reads only `hooks`, so it never mistakes one for a config's approval). The
opt-in variables do not approve a `.env`: those name checked-in configs, not a file that can
reset them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from adapters.config.yaml_config import (
    QmdConfig,
    collection_folder,
    config_dir,
    is_local_config_path,
    project_root,
)

TRUST_FILE = "trusted.json"
OPT_IN_VARIABLES = ("QMD_TRUST_LOCAL_CONFIG", "QMD_TRUST_UPDATE_HOOKS")
MODEL_SLOTS = ("embed", "rerank", "generate")


@dataclass(frozen=True)
class GatedItems:
    """What a local config asks for that needs approval: (collection, command),
    (collection, path as written) and (slot, model reference) pairs."""

    hooks: tuple[tuple[str, str], ...] = ()
    paths: tuple[tuple[str, str], ...] = ()
    models: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.hooks or self.paths or self.models)


@dataclass(frozen=True)
class TrustDecision:
    """Whether this run may use a config's gated fields, and why not when it may not."""

    config_path: str
    local: bool
    gated: GatedItems = field(default_factory=GatedItems)
    digest: str = ""
    allowed: bool = True


def is_inside_project(config_path: str, raw: str, home: str | None = None) -> bool:
    """True when `raw` stays inside the project after `~`, relative and symlink resolution,
    resolved as the index mirror resolves it (`collection_folder`, REQ-CFG-SYNC-001). An empty
    path names no folder, so nothing is indexed from it and there is nothing to approve (the
    original reads it as the project itself: inside too)."""
    folder = collection_folder(raw, config_path, home)
    if not folder:
        return True
    root = os.path.realpath(project_root(config_path))
    target = os.path.realpath(folder)
    relative = os.path.relpath(target, root)
    return relative == "." or not (relative == ".." or relative.startswith(".." + os.sep))


def gated_items(
    config: QmdConfig, config_path: str, builtins: Mapping[str, str], home: str | None = None
) -> GatedItems:
    hooks = tuple(
        (name, c.update_command) for name, c in config.collections.items() if c.update_command
    )
    paths = tuple(
        (name, c.path)
        for name, c in config.collections.items()
        if not is_inside_project(config_path, c.path, home)
    )
    models = tuple(
        (slot, uri)
        for slot in MODEL_SLOTS
        if (uri := config.models.get(slot)) and uri != builtins.get(slot)
    )
    return GatedItems(hooks, paths, models)


def gated_digest(gated: GatedItems, config_path: str, home: str | None = None) -> str:
    """sha256 of the original's canonical JSON: pairs sorted by their first element."""
    canonical = {
        "hooks": sorted([list(h) for h in gated.hooks], key=lambda pair: pair[0]),
        "paths": sorted(
            [[name, collection_folder(raw, config_path, home)] for name, raw in gated.paths],
            key=lambda pair: pair[0],
        ),
        "models": sorted([list(m) for m in gated.models], key=lambda pair: pair[0]),
    }
    text = json.dumps(canonical, ensure_ascii=False, separators=(",", ":"))
    import hashlib  # a project-local config only: your own config is never hashed here

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _truthy(value: str | None) -> bool:
    return bool(value) and (value or "").strip().lower() not in ("0", "false", "off", "no", "none")


def opted_in(env: Mapping[str, str]) -> bool:
    return any(_truthy(env.get(name)) for name in OPT_IN_VARIABLES)


def env_file_key(env_path: str) -> str:
    """Where a `.env` lies, its folder's links resolved but not the file's own: an approval
    holds for the file in that folder, so a `.env` elsewhere linked to an approved one is not
    approved (its relative paths would name another folder's files)."""
    absolute = os.path.abspath(env_path)
    return os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute))


class TrustStore:
    """`<config dir>/trusted.json`: {resolved config path: {hooks: digest, trustedAt}}."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.path = os.path.join(config_dir(env), TRUST_FILE)

    def load(self) -> dict[str, dict[str, str]]:
        try:
            with open(self.path, encoding="utf-8") as handle:
                parsed = json.load(handle)
        except (OSError, ValueError):
            # A missing or corrupt file trusts nothing (never "everything").
            return {}
        if not isinstance(parsed, dict):
            return {}
        return {str(k): v for k, v in parsed.items() if isinstance(v, dict)}

    def _save(self, records: dict[str, dict[str, str]]) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        temporary = self.path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(records, indent=2) + "\n")
        os.replace(temporary, self.path)

    def is_trusted(self, config_path: str, digest: str) -> bool:
        return self.load().get(os.path.abspath(config_path), {}).get("hooks") == digest

    def record(self, config_path: str, digest: str) -> None:
        self._record(config_path, "hooks", digest)

    def is_env_trusted(self, env_path: str, digest: str) -> bool:
        return self.load().get(env_file_key(env_path), {}).get("env") == digest

    def record_env(self, env_path: str, digest: str) -> None:
        self._record(env_file_key(env_path), "env", digest)

    def _record(self, path: str, kind: str, digest: str) -> None:
        records = self.load()
        moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        records[os.path.abspath(path)] = {kind: digest, "trustedAt": moment}
        self._save(records)

    def revoke(self, config_path: str) -> bool:
        records = self.load()
        key = os.path.abspath(config_path)
        if key not in records:
            return False
        del records[key]
        self._save(records)
        return True


def decide(
    config: QmdConfig,
    config_path: str,
    env: Mapping[str, str],
    builtins: Mapping[str, str],
) -> TrustDecision:
    """May this run use `config`'s gated fields? Your own config and an opted-in run may;
    a local config with nothing gated may; otherwise only an approval of this exact set."""
    if not is_local_config_path(config_path):
        return TrustDecision(config_path, local=False)
    home = env.get("HOME")
    gated = gated_items(config, config_path, builtins, home)
    digest = gated_digest(gated, config_path, home)
    allowed = (not gated) or opted_in(env) or TrustStore(env).is_trusted(config_path, digest)
    return TrustDecision(config_path, True, gated, digest, allowed)


def untrusted_view(config: QmdConfig, decision: TrustDecision) -> QmdConfig:
    """The config an unapproved run may act on: no hooks, no outside collections, no custom
    models (in-project indexing goes on; that is what a local config is for)."""
    if decision.allowed:
        return config
    from dataclasses import replace

    outside = {name for name, _ in decision.gated.paths}
    custom = {slot for slot, _ in decision.gated.models}
    collections = {
        name: replace(c, update_command=None)
        for name, c in config.collections.items()
        if name not in outside
    }
    models = {slot: uri for slot, uri in config.models.items() if slot not in custom}
    return replace(config, collections=collections, models=models, raw=None)
