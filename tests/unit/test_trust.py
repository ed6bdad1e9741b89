"""The approval gate for a project-local `.qmd/index.yml` (adapters/config/trust.py)."""

from __future__ import annotations

from pathlib import Path

from adapters.config.trust import TrustStore, decide, gated_items, untrusted_view
from adapters.config.yaml_config import QmdConfig
from domain.model import Collection

BUILTINS = {"embed": "hf:a/b/embed.gguf", "rerank": "hf:a/b/rerank.gguf", "generate": "hf:g"}


def _config(root: Path, **collections: Collection) -> tuple[QmdConfig, str]:
    (root / "p" / ".qmd").mkdir(parents=True)
    return QmdConfig(collections=dict(collections)), str(root / "p" / ".qmd" / "index.yml")


def test_in_project_paths_and_builtin_models_need_no_approval(tmp_path: Path) -> None:
    inside = Collection(name="docs", path="docs")
    config, path = _config(tmp_path, docs=inside)
    config = QmdConfig(collections=config.collections, models=dict(BUILTINS))
    decision = decide(config, path, {"XDG_CONFIG_HOME": str(tmp_path / "c")}, BUILTINS)
    assert decision.local and decision.allowed and not decision.gated


def test_hooks_outside_paths_and_custom_models_are_gated(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "c"), "HOME": str(tmp_path)}
    config, path = _config(
        tmp_path,
        up=Collection(name="up", path="..", update_command="git pull"),
        home=Collection(name="home", path="~/notes"),
        link=Collection(name="link", path="docs/../../p/docs"),  # normalises back inside
    )
    config = QmdConfig(collections=config.collections, models={"embed": "/x/evil.gguf"})
    gated = gated_items(config, path, BUILTINS, env["HOME"])
    assert gated.hooks == (("up", "git pull"),)
    assert gated.paths == (("up", ".."), ("home", "~/notes"))
    assert gated.models == (("embed", "/x/evil.gguf"),)
    decision = decide(config, path, env, BUILTINS)
    assert not decision.allowed
    view = untrusted_view(config, decision)
    assert set(view.collections) == {"link"} and view.models == {}
    assert decide(config, path, {**env, "QMD_TRUST_LOCAL_CONFIG": "1"}, BUILTINS).allowed
    assert not decide(config, path, {**env, "QMD_TRUST_LOCAL_CONFIG": "0"}, BUILTINS).allowed

    TrustStore(env).record(path, decision.digest)
    assert decide(config, path, env, BUILTINS).allowed
    edited = QmdConfig(collections=config.collections, models={"embed": "/x/other.gguf"})
    assert not decide(edited, path, env, BUILTINS).allowed


def test_a_global_config_is_never_gated(tmp_path: Path) -> None:
    hook = Collection(name="h", path="/elsewhere", update_command="rm -rf /")
    config = QmdConfig(collections={"h": hook})
    decision = decide(config, str(tmp_path / "qmd" / "index.yml"), {}, BUILTINS)
    assert not decision.local and decision.allowed


def test_a_corrupt_trust_file_trusts_nothing(tmp_path: Path) -> None:
    env = {"QMD_CONFIG_DIR": str(tmp_path)}
    (tmp_path / "trusted.json").write_text("[not json")
    config, path = _config(tmp_path, up=Collection(name="up", path="/", update_command="x"))
    assert not decide(config, path, env, BUILTINS).allowed
    assert TrustStore(env).load() == {}
