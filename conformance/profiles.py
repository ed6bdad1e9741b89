"""Implementation profiles: how to build the fixture index and launch a stdio server.

A profile is JSON data (conformance/profiles/<name>.json). Command templates are argv lists
with {placeholders}; nothing goes through a shell unless the user passes --setup-cmd.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.cases import EMBEDDED_FIXTURES, FIXTURES, SURFACES, CaseError, package_dir


class ProfileError(ValueError):
    """Bad profile or option combination (usage error, exit 2)."""


@dataclass
class Profile:
    name: str
    surface: str
    goldens: str | None  # whose goldens to compare against (None: matchers only)
    launch: list[str]
    launch_http: list[str] | None = None  # Streamable HTTP on `{port}` (the http transport)
    fixture: str = "default"  # which fixture its setup builds (cases.FIXTURES)
    setup: dict[str, list[str]] = field(default_factory=dict)
    # --setup-cmd (repeatable): shell commands, one setup step each, instead of per-step argv
    setup_shell: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    binary: dict[str, Any] | None = None
    baseline: Path | None = None
    description: str = ""


def profiles_dir() -> Path:
    return package_dir() / "profiles"


def available() -> list[str]:
    return sorted(p.stem for p in profiles_dir().glob("*.json"))


def load(name_or_path: str) -> Profile:
    # Names contain dots (original-2.8.3), so only a .json ending or a slash means a file.
    is_file = name_or_path.endswith(".json") or "/" in name_or_path
    path = Path(name_or_path) if is_file else profiles_dir() / f"{name_or_path}.json"
    if not path.is_file():
        raise ProfileError(
            f"unknown implementation {name_or_path!r}; known: {', '.join(available())}"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CaseError(f"{path}: not JSON: {exc}") from exc
    surface = data.get("surface")
    if surface not in SURFACES:
        raise CaseError(f"{path}: surface must be one of {SURFACES}")
    fixture = data.get("fixture", "default")
    if fixture not in FIXTURES:
        raise CaseError(f"{path}: fixture must be one of {FIXTURES}")
    setup = data.get("setup", {})
    if fixture in EMBEDDED_FIXTURES and setup and "embed" not in setup:
        raise CaseError(f"{path}: the {fixture} fixture needs a setup.embed command")
    baseline = package_dir() / "baselines" / f"{data['name']}.yaml"
    return Profile(
        name=data["name"],
        surface=surface,
        goldens=data.get("goldens"),
        launch=list(data["launch"]),
        launch_http=list(data["launch_http"]) if "launch_http" in data else None,
        fixture=fixture,
        setup={k: list(v) for k, v in data.get("setup", {}).items()},
        env=dict(data.get("env", {})),
        binary=data.get("binary"),
        baseline=baseline if baseline.is_file() else None,
        description=data.get("description", ""),
    )


def from_command_line(
    server_cmd: str,
    setup_cmds: list[str] | None,
    surface: str,
    goldens: str | None,
    fixture: str = "default",
) -> Profile:
    argv = shlex.split(server_cmd)
    if not argv:
        raise ProfileError("--server-cmd is empty")
    return Profile(
        name="custom",
        surface=surface,
        goldens=goldens,
        launch=argv,
        fixture=fixture,
        setup_shell=list(setup_cmds or []),
        description=f"--server-cmd {server_cmd!r}",
    )


# --- locating binaries -----------------------------------------------------------------


def repo_root() -> Path:
    """The checkout a profile's relative defaults (`.tools/original`, `.venv/bin/qmd`) are in.

    Run from the source tree (the package folder holds its pyproject.toml), the folder above
    it; installed as the qmd-conformance wheel, the current directory.
    """
    if (package_dir() / "pyproject.toml").is_file():
        return package_dir().parent
    return Path.cwd()


def binary_root(profile: Profile) -> Path | None:
    """The folder a profile's binary defaults are relative to (`{root}` in its env)."""
    return None if profile.binary is None else _binary_root(profile.binary)


def _binary_root(spec: dict[str, Any]) -> Path:
    """Where the profile's default patterns are looked up (an install dir, or the repo)."""
    env_name = spec.get("root_env")
    if env_name and os.environ.get(env_name):
        return Path(os.environ[env_name])
    return repo_root() / str(spec.get("root", "."))


def resolve_binary(profile: Profile, explicit: str | None) -> tuple[str | None, list[str]]:
    """Return (qmd executable, directories to put first on PATH)."""
    spec = profile.binary
    if spec is None:
        return None, []
    candidates: list[str] = []
    if explicit:
        candidates.append(explicit)
    env_name = spec.get("env")
    if env_name and os.environ.get(env_name):
        candidates.append(os.environ[env_name])
    # Either the executable or the folder holding it may be given.
    candidates = [str(Path(c) / "qmd") if Path(c).is_dir() else c for c in candidates]
    root = _binary_root(spec)
    for pattern in spec.get("defaults", []):
        candidates += sorted(glob.glob(str(root / pattern)))
    qmd = next((c for c in candidates if Path(c).is_file() and os.access(c, os.X_OK)), None)
    if qmd is None:
        hint = spec.get("install_hint", "")
        raise FileNotFoundError(
            f"{profile.name}: no qmd executable found (tried {candidates or 'nothing'}; "
            f"use {spec.get('option', '--qmd-bin')} or ${env_name}). {hint}".strip()
        )
    path_dirs: list[str] = []
    node_spec = spec.get("node")
    if node_spec:
        path_dirs.append(_resolve_node(node_spec, root, Path(qmd)))
    return str(Path(qmd).absolute()), path_dirs


def _node_major(node: str) -> int:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    m = re.match(r"v(\d+)", out.stdout.strip())
    return int(m.group(1)) if m else 0


def _resolve_node(spec: dict[str, Any], root: Path, qmd: Path) -> str:
    need = int(spec.get("min_major", 0))
    candidates: list[str] = []
    env_name = spec.get("env")
    if env_name and os.environ.get(env_name):
        candidates.append(os.environ[env_name])
    for pattern in spec.get("defaults", []):
        candidates += sorted(glob.glob(str(root / pattern)))
    # An install that keeps node next to qmd (…/node22/…/bin/node beside …/qmd/…).
    for parent in list(qmd.resolve().parents)[:6]:
        candidates += sorted(glob.glob(str(parent / "*" / "node_modules" / "*" / "bin" / "node")))
    on_path = shutil.which("node")
    if on_path:
        candidates.append(on_path)
    for cand in candidates:
        if Path(cand).is_file() and _node_major(cand) >= need:
            return str(Path(cand).parent.absolute())
    raise FileNotFoundError(
        f"no Node >= {need} found (tried {candidates}); set ${env_name} to a node binary"
    )
