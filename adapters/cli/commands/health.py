"""The parts of `qmd status` and `qmd doctor` that explain the set-up: which models are in use,
which vectors came from which model, which environment variables change behaviour, and what
to do next (the original's Models / Tips sections, environment overrides and next steps)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapters.bootstrap import App
    from domain.indexing import IndexStatus
    from domain.model import Collection

# What each variable does when set; doctor lists the ones present.
ENVIRONMENT_EFFECTS: Mapping[str, str] = {
    "INDEX_PATH": "uses this index file instead of ~/.cache/qmd/<index>.sqlite",
    "QMD_CONFIG_DIR": "reads and writes index.yml (and trusted.json) in this folder",
    "XDG_CONFIG_HOME": "moves the config to $XDG_CONFIG_HOME/qmd when QMD_CONFIG_DIR is not set",
    "XDG_CACHE_HOME": "moves the default index and the model cache",
    "QMD_EMBED_MODEL": "sets the embedding model; vectors from another model need 'qmd embed -f'",
    "QMD_RERANK_MODEL": "sets the rerank model used by 'qmd query'",
    "QMD_GENERATE_MODEL": "sets the query-expansion model used by 'qmd query'",
    "QMD_FORCE_CPU": "keeps model inference on the CPU",
    "QMD_OFFLINE": "never downloads a model (a missing one is reported at once)",
    "HF_HUB_OFFLINE": "never downloads a model (a missing one is reported at once)",
    "HF_ENDPOINT": "downloads hf: models from this mirror",
    "QMD_TRUST_LOCAL_CONFIG": "trusts a checked-in .qmd/index.yml without asking",
    "QMD_TRUST_UPDATE_HOOKS": "trusts a checked-in .qmd/index.yml without asking",
    "QMD_EXPAND_MAX_TOKENS": "bounds the query-expansion output",
    "QMD_EDITOR_URI": "editor link template for terminal search results",
    "NO_COLOR": "disables colored terminal output",
}
ROLE_LABELS = (("embed", "Embedding"), ("rerank", "Reranking"), ("generate", "Generation"))


def active_model_refs(app: App) -> dict[str, str]:
    """Model reference per role as this run uses them (an unapproved local config's custom
    models left out, as when the models load)."""
    from adapters.config.trust import untrusted_view
    from adapters.config.yaml_config import load_config
    from adapters.models.factory import configured_refs

    config = app.settings if app.settings is not None else load_config(app.config_path)
    if app.trust is not None:
        config = untrusted_view(config, app.trust)
    folder = os.path.dirname(os.path.abspath(app.config_path))
    return configured_refs(config.models, folder, os.environ)


def other_model_vectors(app: App) -> dict[str, int]:
    """Documents whose vectors came from a model other than the current embedding model (a
    name that is another path to its file is not another model: REQ-VEC-MODEL-001)."""
    if app.maintenance is None:
        return {}
    current = app.models.identity.model
    by_model = app.maintenance.embedded_by_model()
    same = {name for name, _ in app.models.identity.also(by_model, app.models.same_model)}
    return {m: n for m, n in by_model.items() if m != current and m not in same}


def status_sections(
    app: App,
    report: IndexStatus,
    collections: Sequence[Collection],
    global_context: str | None,
) -> list[str]:
    """`Models` and `Tips` for `qmd status` (`collections` and `global_context` as the
    status read them)."""
    refs = active_model_refs(app)
    lines = ["", "Models"]
    lines += [f"  {label + ':':<12} {refs[role]}" for role, label in ROLE_LABELS]
    others = other_model_vectors(app)
    for model, count in others.items():
        lines.append(f"  Vectors:     {count} document(s) embedded with {model}")
    tips: list[str] = []
    if others and report.needs_embedding:
        tips += [
            f"  {report.needs_embedding} document(s) have no vectors from the current embedding "
            "model (some have vectors from another one):",
            "    qmd embed -f   # re-embed everything with the current model",
        ]
    elif report.needs_embedding:
        tips += [f"  {report.needs_embedding} document(s) need vectors for vsearch/query:"]
        tips += ["    qmd embed"]
    if app.trust is not None and not app.trust.allowed:
        tips += ["  This project's .qmd config asks for more than indexing it; review it:"]
        tips += ["    qmd trust"]
    without_context = [c.name for c in collections if not c.contexts]
    if without_context and not global_context:
        tips += [
            f"  Add context to collections for better search results: {', '.join(without_context)}",
            '    qmd context add qmd://<name>/ "What this collection contains"',
            '    qmd context add qmd://<name>/meeting-notes "Weekly team meeting notes"',
        ]
    if tips:
        lines += ["", "Tips", *tips]
    return lines


def environment_overrides(env: Mapping[str, str]) -> list[str]:
    """`doctor`: the variables set in this environment that change what qmd does."""
    present = [name for name in ENVIRONMENT_EFFECTS if env.get(name)]
    if not present:
        return ["✓ environment overrides: none set"]
    from adapters.redaction import redact

    lines = [f"⚠ environment overrides: {len(present)} set"]
    # INDEX_PATH may be a database URL with its password (REQ-SEC-SECRET-001)
    lines += [f"  - {name}={redact(env[name])}: {ENVIRONMENT_EFFECTS[name]}" for name in present]
    return lines


def embedding_freshness(app: App, report: IndexStatus) -> tuple[list[str], list[str]]:
    """`doctor`: are the vectors from the current model, and complete? (lines, next steps)"""
    others = other_model_vectors(app)
    model = app.models.identity.model
    lines: list[str] = []
    steps: list[str] = []
    if report.total_documents == 0:
        lines.append("✓ embedding freshness: no documents indexed yet")
        steps.append("Run `qmd collection add <folder>` to index a folder.")
    elif report.needs_embedding == 0:
        lines.append(f"✓ embedding freshness: every document has vectors from {model}")
    else:
        lines.append(
            f"⚠ embedding freshness: {report.needs_embedding} active document(s) need vectors "
            f"from {model}. Next: `qmd embed`"
        )
        steps.append("Run `qmd embed` so vsearch and query see every document.")
    for other, count in others.items():
        lines.append(f"⚠ embedding model: {count} document(s) have vectors from {other}")
        steps.append(
            f"Run `qmd embed -f` to re-embed with {model}, or set QMD_EMBED_MODEL={other} "
            "(or models: embed: in index.yml) to keep using the old vectors."
        )
    return lines, steps
