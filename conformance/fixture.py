"""Builds the fixture index once per (implementation, fixture) in a scratch directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from conformance.cases import EMBEDDED_FIXTURES, package_dir
from conformance.profiles import Profile, binary_root, repo_root
from conformance.transport import ServerStartError

# An embedding step runs a model on CPU; on a busy CI machine that takes minutes (EmbeddingGemma
# on a loaded two-core machine: more than 15). QMD_CONFORMANCE_SETUP_TIMEOUT raises the limit.
SETUP_STEP_TIMEOUT_S = 900


def setup_step_timeout() -> float:
    try:
        value = float(os.environ.get("QMD_CONFORMANCE_SETUP_TIMEOUT", ""))
    except ValueError:
        return SETUP_STEP_TIMEOUT_S
    return value if value > 0 else SETUP_STEP_TIMEOUT_S


# Variables that would let the caller's own QMD state (or CI switches) leak into a run.
_SCRUBBED_PREFIXES = ("QMD_", "XDG_")
_SCRUBBED = {"INDEX_PATH", "CI", "NODE_OPTIONS"}


def default_fixtures_dir() -> Path:
    env = os.environ.get("QMD_CONFORMANCE_FIXTURES")
    if env:
        return Path(env)
    # The wheel carries the fixtures inside the package; the source tree keeps them at its root.
    for cand in (package_dir() / "fixtures", repo_root() / "fixtures", Path.cwd() / "fixtures"):
        if (cand / "setup.json").is_file():
            return cand
    raise FileNotFoundError("fixtures/setup.json not found; pass --fixtures DIR")


@dataclass
class Scratch:
    root: Path
    fixtures: Path  # the copy every implementation indexes
    index: Path
    config_dir: Path
    home: Path
    setup: dict[str, Any]

    def placeholders(self, qmd: str | None) -> dict[str, str]:
        return {
            "fixtures": str(self.fixtures),
            "index": str(self.index),
            "config_dir": str(self.config_dir),
            "home": str(self.home),
            "qmd": qmd or "qmd",
        }

    def fixture_roots(self) -> list[str]:
        """The copy's path first (what setup passed to the server), then its realpath."""
        roots = [str(self.fixtures)]
        if str(self.fixtures.resolve()) != roots[0]:
            roots.append(str(self.fixtures.resolve()))
        return roots


def make_scratch(base: Path, fixtures_src: Path, fixture: str = "default") -> Scratch:
    setup = json.loads((fixtures_src / "setup.json").read_text(encoding="utf-8"))
    fixtures = base / "fixtures"
    shutil.copytree(fixtures_src, fixtures)
    # A fixture may leave files out of its copy: the real-models one drops the two long
    # references, whose 80 KB an EmbeddingGemma `qmd embed` needs many CPU-minutes for.
    for rel in setup.get("leave_out", {}).get(fixture, []):
        (fixtures / rel).unlink()
    for coll in setup["collections"]:
        stamp = datetime.fromisoformat(coll["mtime"].replace("Z", "+00:00")).timestamp()
        top = fixtures / coll["path"]
        for path in sorted(top.rglob("*")):
            os.utime(path, (stamp, stamp), follow_symlinks=False)
        os.utime(top, (stamp, stamp))
    home = base / "home"
    config_dir = base / "config"
    for d in (home, config_dir):
        d.mkdir()
    return Scratch(base, fixtures, base / "index.sqlite", config_dir, home, setup)


def server_env(scratch: Scratch, profile: Profile, path_dirs: list[str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _SCRUBBED and not k.startswith(_SCRUBBED_PREFIXES)
    }
    env.update(
        {
            "HOME": str(scratch.home),
            "XDG_CACHE_HOME": str(scratch.home / ".cache"),
            "XDG_CONFIG_HOME": str(scratch.home / ".config"),
            "INDEX_PATH": str(scratch.index),
            "QMD_CONFIG_DIR": str(scratch.config_dir),
            "NO_COLOR": "1",
            "QMD_FIXTURE_ROOT": str(scratch.fixtures),
            "QMD_FIXTURE_SETUP": str(scratch.fixtures / "setup.json"),
        }
    )
    if path_dirs:
        env["PATH"] = os.pathsep.join([*path_dirs, env.get("PATH", "")])
    subst = scratch.placeholders(None)
    subst["repo"] = str(repo_root())  # e.g. the local GGUF models in {repo}/.models
    root = binary_root(profile)
    if root is not None:
        subst["root"] = str(root)
    # `{scratch_id}`: unique per scratch copy (e.g. a database schema of its own);
    # `{environ[NAME]}`: a variable of the runner's environment (e.g. a database URL).
    subst["scratch_id"] = re.sub(r"[^a-z0-9]", "_", scratch.root.parent.name.lower())
    for key, value in profile.env.items():
        env[key] = value.format(**subst, environ=dict(os.environ))
    return env


def profile_placeholders(scratch: Scratch, profile: Profile, qmd: str | None) -> dict[str, str]:
    """Placeholders for a profile's setup and launch argv: the scratch paths, `{qmd}`, and
    `{root}` (the folder its binary defaults are relative to) when it has one."""
    values = scratch.placeholders(qmd)
    root = binary_root(profile)
    if root is not None:
        values["root"] = str(root)
    return values


def expand(argv: list[str], values: dict[str, str]) -> list[str]:
    return [part.format(**values) for part in argv]


def setup_commands(scratch: Scratch, profile: Profile, qmd: str | None) -> list[list[str]]:
    """The argv list the profile's setup steps expand to, in setup.json order."""
    base = profile_placeholders(scratch, profile, qmd)
    steps = scratch.setup
    out: list[list[str]] = []
    tmpl = profile.setup
    for coll in steps["collections"]:
        out.append(
            expand(
                tmpl["collection"],
                {
                    **base,
                    "name": coll["name"],
                    "path": str(scratch.fixtures / coll["path"]),
                    "mask": coll["mask"],
                },
            )
        )
    for ctx in steps.get("contexts", []):
        out.append(expand(tmpl["context"], {**base, "target": ctx["target"], "text": ctx["text"]}))
    for name in steps.get("exclude", []):
        out.append(expand(tmpl["exclude"], {**base, "name": name}))
    if "finish" in tmpl:  # a port that indexes in a step of its own (e.g. `update`)
        out.append(expand(tmpl["finish"], base))
    if profile.fixture in EMBEDDED_FIXTURES:
        out.append(expand(tmpl["embed"], base))
    return out


@dataclass(frozen=True)
class SetupFailure:
    """A setup step that failed; the run goes on (a port may lack a setup feature)."""

    step: int  # 1-based, in setup order
    total: int
    kind: str  # collection, context, exclude, finish, embed, or shell
    command: str
    reason: str

    def render(self) -> str:
        head = f"setup step {self.step}/{self.total} ({self.kind}) failed: {self.command}"
        return f"{head}\n  {self.reason}"


def setup_steps(scratch: Scratch, profile: Profile, qmd: str | None) -> list[tuple[str, list[str]]]:
    """(kind, argv) per setup step: the profile's commands or the --setup-cmd shell lines."""
    if profile.setup_shell:
        values = scratch.placeholders(qmd)
        return [("shell", ["bash", "-c", line.format(**values)]) for line in profile.setup_shell]
    if not profile.setup:
        return []
    kinds = (
        ["collection"] * len(scratch.setup["collections"])
        + ["context"] * len(scratch.setup.get("contexts", []))
        + ["exclude"] * len(scratch.setup.get("exclude", []))
        + (["finish"] if "finish" in profile.setup else [])
        + (["embed"] if profile.fixture in EMBEDDED_FIXTURES else [])
    )
    return list(zip(kinds, setup_commands(scratch, profile, qmd), strict=True))


def run_setup(
    scratch: Scratch, profile: Profile, qmd: str | None, env: dict[str, str]
) -> tuple[str, list[SetupFailure]]:
    """Run every setup step; returns a transcript for the log and the steps that failed.

    A failing step does not stop the setup: the cases that need what it would have built fail
    on their own, and the others still say something. Only when every step fails (nothing was
    set up) is it ServerStartError.
    """
    steps = setup_steps(scratch, profile, qmd)
    if not steps:
        return "(no setup)", []
    log: list[str] = []
    failures: list[SetupFailure] = []
    for number, (kind, argv) in enumerate(steps, start=1):
        shown = " ".join(argv)
        try:
            proc = subprocess.run(
                argv,
                env=env,
                cwd=scratch.root,
                capture_output=True,
                text=True,
                timeout=setup_step_timeout(),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            failures.append(SetupFailure(number, len(steps), kind, shown, str(exc)))
            log.append(f"$ {shown}\n{exc}")
            continue
        log.append(f"$ {shown}\n{proc.stdout}{proc.stderr}")
        if proc.returncode != 0:
            tail = (proc.stderr.strip() or proc.stdout.strip())[-600:]
            failures.append(
                SetupFailure(number, len(steps), kind, shown, f"exited {proc.returncode}: {tail}")
            )
    if len(failures) == len(steps):
        raise ServerStartError(
            "every setup step failed:\n" + "\n".join(f.render() for f in failures)
        )
    return "\n".join(log), failures
