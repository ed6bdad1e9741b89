"""`qmd init` and `qmd trust`: a project-local `.qmd/` index and the approval of what a
checked-in `.qmd/index.yml` asks for (update commands, outside folders, custom models), or
of a working folder's `.env` file (`qmd trust FILE`, REQ-SEC-ENV-003)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import TYPE_CHECKING

from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable
from adapters.cli.runtime import open_app, out

if TYPE_CHECKING:
    from adapters.bootstrap import App
    from adapters.config.trust import GatedItems


def init(args: argparse.Namespace) -> int:
    """Create `./.qmd/index.yml` (no collections, the models in effect) and its index."""
    from adapters.config.yaml_config import QmdConfig, load_config, save_config
    from adapters.models.references import select_model_refs

    cwd = os.getcwd()
    home = os.environ.get("HOME") or os.path.expanduser("~")
    if os.path.realpath(cwd) == os.path.realpath(home):
        raise CommandError(
            "Refusing to initialize a local index in $HOME. The global index is created "
            "automatically; run `qmd collection add <path>` for it, or run `qmd init` inside "
            "a project folder."
        )
    folder = os.path.join(cwd, ".qmd")
    existing = next(
        (
            p
            for p in (os.path.join(folder, n) for n in ("index.yaml", "index.yml"))
            if os.path.isfile(p)
        ),
        None,
    )
    config_path = existing or os.path.join(folder, "index.yml")
    os.makedirs(folder, exist_ok=True)
    if existing is None:
        models = {str(role): ref for role, ref in select_model_refs({}, os.environ).items()}
        save_config(config_path, QmdConfig(models=models))
    else:
        load_config(config_path)  # a broken file is reported now, not on first search
    # Opening the app from here finds the new config and creates `.qmd/index.sqlite`.
    local_args = argparse.Namespace(**{**vars(args), "index": None})
    with open_app(local_args) as app:
        if os.path.realpath(app.config_path) != os.path.realpath(config_path):
            raise CommandError(f"qmd init: {config_path} was not picked up")  # pragma: no cover
    out("ready to go with new local index\n")
    return 0


def print_gated(gated: GatedItems) -> None:
    if gated.hooks:
        out("This project's config defines update commands:\n")
        out("".join(f"  {name}: {command}\n" for name, command in gated.hooks))
    if gated.paths:
        out("Collection paths outside this project:\n")
        out("".join(f"  {name}: {path}\n" for name, path in gated.paths))
    if gated.models:
        out("Custom models:\n")
        out("".join(f"  {slot}: {uri}\n" for slot, uri in gated.models))


TRUST_ACTIONS = ("list", "revoke")
# values of these are shown only by length when a `.env` is approved: a terminal's scrollback
# is no place for a key
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


def trust(args: argparse.Namespace) -> int:
    from adapters.config.trust import TrustStore

    action, file = _trust_words([w for w in (args.action, args.file) if w is not None])
    if file is not None:
        return _trust_env_file(file, revoke=action == "revoke")
    store = TrustStore(os.environ)
    if action == "list":
        records = store.load()
        if not records:
            out("No trusted project configs.\n")
        for path, record in records.items():
            out(f"{path} (trusted {record.get('trustedAt', '?')})\n")
        return 0
    with open_app(args) as app:
        decision = app.trust
        config_path = app.config_path
    if decision is None or not decision.local:
        if action == "revoke":
            out(
                f"No project-local .qmd config in scope — {config_path} is your own config and "
                "is never gated.\nRun this from inside the project, or see 'qmd trust list'.\n"
            )
        else:
            out(f"{config_path} is your own config — it is never gated. Nothing to trust.\n")
        return 0
    if action == "revoke":
        if store.revoke(config_path):
            out(f"✓ Revoked trust for {os.path.abspath(config_path)}\n")
        else:
            out(f"{config_path} was not trusted.\n")
        return 0
    if not decision.gated:
        out(
            f"{config_path} defines no update commands, out-of-project collection paths, or "
            "custom models. Nothing to trust.\n"
        )
        return 0
    print_gated(decision.gated)
    store.record(config_path, decision.digest)
    out(
        f"✓ Trusted {os.path.abspath(config_path)}\n"
        "Editing a hook, out-of-project path, or custom model will ask again. "
        "Revoke with 'qmd trust revoke'.\n"
    )
    return 0


def _trust_words(words: list[str]) -> tuple[str | None, str | None]:
    """`qmd trust [list | revoke] [FILE]`: (action, file)."""
    action = words[0] if words and words[0] in TRUST_ACTIONS else None
    rest = words[1:] if action is not None else words
    if len(rest) > 1 or (action == "list" and rest):
        raise CommandError("usage: qmd trust [list | revoke] [FILE]", code=2)
    return action, (rest[0] if rest else None)


def _trust_env_file(file: str, revoke: bool) -> int:
    """Approve (or revoke) a `.env` file: its variables are then read in full by a server
    started in its folder, until the file changes (a digest of its bytes)."""
    from adapters.config.service import read_env_file
    from adapters.config.trust import TrustStore, env_file_key
    from domain.errors import QmdError

    path = env_file_key(file)
    store = TrustStore(os.environ)
    if revoke:
        if store.revoke(path):
            out(f"✓ Revoked trust for {path}\n")
        else:
            out(f"{path} was not trusted.\n")
        return 0
    try:
        text = read_env_file(path)
    except QmdError as error:
        raise CommandError(f"qmd trust: {error.message}", code=1) from error
    variables = text.variables(interpolate=False)  # as written: what is being approved
    if variables:
        out("This .env file sets:\n")
        out("".join(f"  {name}={_shown(name, value)}\n" for name, value in variables.items()))
    store.record_env(path, text.digest)
    out(
        f"✓ Trusted {path}\n"
        "Editing it will ask again. Revoke with 'qmd trust revoke "
        f"{shlex.quote(path)}'.\n"
    )
    return 0


def _shown(name: str, value: str) -> str:
    if any(word in name.upper() for word in SECRET_WORDS):
        return f"<{len(value)} characters>"
    return value


def approve_for_update(app: App) -> bool:
    """Before `qmd update`/`embed` use a local config's gated fields: allowed, approved now on
    a terminal, or skipped with the reason (in-project indexing goes on either way)."""
    from adapters.config.trust import TrustStore

    decision = app.trust
    if decision is None or decision.allowed:
        return True
    print_gated(decision.gated)
    out("Config that came with a checkout is not trusted by default.\n")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        out(
            "Skipping them — no terminal to confirm on. Indexing of this project continues.\n"
            "Approve with 'qmd trust', or set QMD_TRUST_LOCAL_CONFIG=1 for unattended runs.\n\n"
        )
        return False
    sys.stdout.write("Trust this project's .qmd config? [y/N] ")
    sys.stdout.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        out("Skipped. Indexing of this project continues.\n\n")
        return False
    TrustStore(os.environ).record(decision.config_path, decision.digest)
    out(f"Trusted {decision.config_path}. Editing a hook, path, or model will ask again.\n\n")
    return True


def outside_project(app: App, name: str) -> bool:
    """A collection of an unapproved local config whose folder lies outside the project."""
    decision = app.trust
    if decision is None or decision.allowed:
        return False
    return any(collection == name for collection, _ in decision.gated.paths)


def register(table: CommandTable) -> None:
    table.command("init", init, "create a project-local .qmd index here")
    trusting = table.command(
        "trust", trust, "approve a checked-in .qmd config's hooks/paths/models, or a .env file"
    )
    # two optional words, read by _trust_words: `qmd trust .env` puts the file first
    trusting.add_argument(
        "action", nargs="?", metavar="list|revoke", help="list approvals or revoke this one"
    )
    trusting.add_argument(
        "file", nargs="?", metavar="FILE", help="a .env file to approve (or revoke)"
    )


def trust_own_edit(app: App) -> None:
    """The user just typed this path or command, so it needs no separate approval: re-record
    the local config's gated set (as the original after `collection add`/`update-cmd`)."""
    from adapters.bootstrap import builtin_models
    from adapters.config.trust import TrustStore, decide
    from adapters.config.yaml_config import load_config

    decision = decide(load_config(app.config_path), app.config_path, os.environ, builtin_models())
    if decision.local and decision.gated:
        TrustStore(os.environ).record(app.config_path, decision.digest)
