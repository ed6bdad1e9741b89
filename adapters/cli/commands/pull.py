"""`qmd pull`: say which model files the index uses, where each one is, and fetch the missing
ones. Without a network it fails fast (one connect attempt per download, `QMD_OFFLINE`
skips even that) and says what it would have fetched."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable
from adapters.cli.runtime import err, open_app, out


def _size(path: str) -> str:
    size = float(os.path.getsize(path))
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return ""  # pragma: no cover - the loop always returns


def pull(args: argparse.Namespace) -> int:
    from adapters.bootstrap import builtin_models
    from adapters.config.trust import decide, untrusted_view
    from adapters.config.yaml_config import load_config
    from adapters.models.factory import is_off
    from adapters.models.references import ROLES, ModelResolver, select_model_refs
    from domain.errors import QmdError

    if args.refresh:
        raise CommandError(
            "qmd pull --refresh: not supported: a cached model file is never replaced in place. "
            "Delete it from the model cache (see 'qmd pull') and run 'qmd pull' again."
        )
    with open_app(args) as app:
        config_path = app.config_path
    config = load_config(config_path)
    trust = decide(config, config_path, os.environ, builtin_models())
    references = select_model_refs(untrusted_view(config, trust).models, os.environ)
    resolver = ModelResolver(base_dir=Path(config_path).resolve().parent)
    out("Pulling models\n")
    failures = []
    for role in ("embed", "generate", "rerank"):
        assert role in ROLES
        reference = references[role]
        if is_off(reference):
            out(f"- {role}: none (that stage is off)\n")
            continue
        cached = resolver.find_cached(reference)
        if cached is not None:
            out(f"- {reference} -> {cached} ({_size(str(cached))}, cached/checked)\n")
            continue
        try:
            path = resolver.resolve(reference, role)
        except QmdError as error:
            failures.append(role)
            err(f"- {role}: {error.message}")
            continue
        out(f"- {reference} -> {path} ({_size(str(path))}, downloaded)\n")
    if failures:
        raise CommandError(
            f"qmd pull: {len(failures)} model(s) could not be fetched ({', '.join(failures)}). "
            "Searches that need them skip that stage; 'qmd search' needs no model."
        )
    return 0


def register(table: CommandTable) -> None:
    command = table.command("pull", pull, "fetch the embedding/generation/rerank models")
    command.add_argument("--refresh", action="store_true", help="(not supported; says why)")
    command.add_argument("--progress", action="store_true", help="accepted; progress is quiet")
