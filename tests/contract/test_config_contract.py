"""ConfigRepository contract (in-memory fake and index.yml), plus index.yml parsing, path
resolution and the YAML → store mirror."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.config.trust import gated_items, is_inside_project
from adapters.config.yaml_config import (
    QmdConfig,
    YamlConfigRepository,
    collection_folder,
    config_hash,
    dump_config,
    load_config,
    parse_config,
    resolve_paths,
    sync_config_to_store,
)
from domain.errors import CONFLICT, INVALID_ARGUMENT, QmdError
from domain.model import Collection
from tests.contract.conftest import StoreLike
from tests.fakes import InMemoryConfigRepository

Repo = InMemoryConfigRepository | YamlConfigRepository

FULL = Collection(
    name="docs",
    path="/srv/docs",
    pattern="**/*.{md,txt}",
    ignore=("drafts/**",),
    include_by_default=False,
    update_command="git pull --ff-only",
    contexts={"": "All the docs", "api/v1": "API: «v1» 日本"},
)


@pytest.fixture(params=["fake", "yaml"])
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Repo:
    if request.param == "fake":
        return InMemoryConfigRepository()
    return YamlConfigRepository(tmp_path / "config" / "qmd" / "index.yml")


def test_collections_crud(repo: Repo) -> None:
    assert repo.load_collections() == []
    repo.save_collection(Collection(name="notes", path="/srv/notes"))
    repo.save_collection(FULL)
    assert repo.load_collections() == [Collection(name="notes", path="/srv/notes"), FULL]
    repo.rename_collection("notes", "journal")
    assert [c.name for c in repo.load_collections()] == ["journal", "docs"]
    assert repo.load_collections()[0].path == "/srv/notes"
    with pytest.raises(QmdError) as info:
        repo.rename_collection("journal", "docs")
    assert info.value.code == CONFLICT
    repo.delete_collection("journal")
    assert repo.load_collections() == [FULL]


def test_global_context(repo: Repo) -> None:
    assert repo.load_global_context() is None
    repo.save_global_context("Everything I know")
    assert repo.load_global_context() == "Everything I know"
    repo.save_global_context(None)
    assert repo.load_global_context() is None


ORIGINAL_YAML = """\
collections:
  handbook:
    path: /srv/qmdorig/corpus
    pattern: "**/*.md"
    context:
      "": "Project handbook: engineering notes"
      engineering/api: "HTTP API documentation"
  archive:
    path: /srv/archive
    pattern: "**/*.md"
    ignore:
      - "old/**"
    update: git pull
    includeByDefault: false
    future_key: 7
models:
  embed: hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf
  rerank: /models/rerank.gguf
global_context: Shared context
editorUri: "zed://file/{path}:{line}"
unknown_top: [1, 2]
"""


def test_parse_original_yaml_and_round_trip(tmp_path: Path) -> None:
    config = parse_config(ORIGINAL_YAML)
    assert list(config.collections) == ["handbook", "archive"]
    handbook = config.collections["handbook"]
    assert handbook.contexts == {
        "": "Project handbook: engineering notes",
        "engineering/api": "HTTP API documentation",
    }
    assert handbook.include_by_default and handbook.ignore == ()
    archive = config.collections["archive"]
    assert archive.ignore == ("old/**",)
    assert archive.update_command == "git pull"
    assert archive.include_by_default is False
    assert config.models["rerank"] == "/models/rerank.gguf"
    assert config.global_context == "Shared context"
    assert config.editor_uri == "zed://file/{path}:{line}"
    path = tmp_path / "index.yml"
    path.write_text(dump_config(config), encoding="utf-8")
    again = load_config(path)
    assert again.collections == config.collections
    assert (again.models, again.global_context, again.editor_uri) == (
        config.models,
        config.global_context,
        config.editor_uri,
    )
    assert again.extra == {"unknown_top": [1, 2]}
    assert again.collection_extra == {"archive": {"future_key": 7}}


def test_missing_empty_and_broken_files(tmp_path: Path) -> None:
    assert load_config(tmp_path / "absent.yml") == QmdConfig()
    (tmp_path / "empty.yml").write_text("")
    assert load_config(tmp_path / "empty.yml").collections == {}
    (tmp_path / "bad.yml").write_text("collections: [unclosed\n")
    with pytest.raises(QmdError) as info:
        load_config(tmp_path / "bad.yml")
    assert info.value.code == INVALID_ARGUMENT


def test_config_hash_matches_json_stringify() -> None:
    config = parse_config(ORIGINAL_YAML)
    raw = json.dumps(config.raw, ensure_ascii=False, separators=(",", ":"))
    assert raw.startswith('{"collections":{"handbook":{"path":"/srv/qmdorig/corpus"')
    # a file written by the original (`qmd collection add`) and the hash it stored for it
    original = parse_config(
        "collections:\n  notes:\n    path: /tmp/tmp.uQFUNhm0RM/corpus\n"
        '    pattern: "**/*.md"\nmodels:\n  embed: /nonexist/e.gguf\n'
        "  generate: /nonexist/g.gguf\n  rerank: /nonexist/r.gguf\n"
    )
    assert config_hash(original) == (
        "a088208d4e67f29ce19a3fd9c9ac1286e229d6299cf766cd0d5b2df81a29a9b5"
    )


def test_resolve_paths(tmp_path: Path) -> None:
    env = {"HOME": "/home/u"}
    assert resolve_paths(None, env, cwd=str(tmp_path)) == (
        "/home/u/.cache/qmd/index.sqlite",
        "/home/u/.config/qmd/index.yml",
    )
    env = {"HOME": "/home/u", "XDG_CACHE_HOME": "/xc", "XDG_CONFIG_HOME": "/xg"}
    assert resolve_paths("work", env, cwd=str(tmp_path)) == (
        "/xc/qmd/work.sqlite",
        "/xg/qmd/work.yml",
    )
    env = {**env, "QMD_CONFIG_DIR": "/cfg", "INDEX_PATH": "/db/x.sqlite"}
    assert resolve_paths("work", env, cwd=str(tmp_path)) == ("/db/x.sqlite", "/cfg/work.yml")
    assert resolve_paths("rel/dir", {"HOME": "/h"}, cwd="/base") == (
        "/h/.cache/qmd/base_rel_dir.sqlite",
        "/h/.config/qmd/base_rel_dir.yml",
    )
    project = tmp_path / "project"
    (project / ".qmd").mkdir(parents=True)
    (project / ".qmd" / "index.yml").write_text("collections: {}\n")
    (project / "deep" / "er").mkdir(parents=True)
    assert resolve_paths(None, {"HOME": "/h"}, cwd=str(project / "deep" / "er")) == (
        str(project / ".qmd" / "index.sqlite"),
        str(project / ".qmd" / "index.yml"),
    )
    assert resolve_paths("named", {"HOME": "/h"}, cwd=str(project))[1] == "/h/.config/qmd/named.yml"


def test_sync_config_to_store(store: StoreLike) -> None:
    store.put_collection(Collection(name="stale", path="/stale"))
    config = parse_config(ORIGINAL_YAML)
    assert sync_config_to_store(config, store) is True
    assert [c.name for c in store.list_collections()] == ["handbook", "archive"]
    assert store.get_collection("archive") == config.collections["archive"]
    assert store.get_global_context() == "Shared context"
    assert store.get_config_value("config_hash") == config_hash(config)
    # unchanged: skipped, even if the table was touched meanwhile
    store.put_collection(Collection(name="manual", path="/m"))
    assert sync_config_to_store(config, store) is False
    assert store.get_collection("manual") is not None
    changed = config.without_collection("archive").with_global_context(None)
    assert sync_config_to_store(changed, store) is True
    assert [c.name for c in store.list_collections()] == ["handbook"]
    assert store.get_global_context() is None


def test_sync_stores_collection_folders_absolute(store: StoreLike) -> None:
    """`~` and relative folders are resolved against home and index.yml's folder, never the
    current directory, so indexing and `--force-root` read the same folder (REQ-SPEC-ROOT-001)."""
    config = parse_config(
        "collections:\n"
        "  rel:\n    path: notes/../notes2\n"
        "  home:\n    path: ~/docs\n"
        "  abs:\n    path: /srv/x/\n"
        "  empty:\n    path: ''\n"
    )
    assert sync_config_to_store(config, store, config_path="/cfg/qmd/index.yml", home="/h") is True
    paths = {c.name: c.path for c in store.list_collections()}
    assert paths == {"rel": "/cfg/qmd/notes2", "home": "/h/docs", "abs": "/srv/x", "empty": ""}
    # A store that still holds a relative folder (written before) is re-synced.
    store.put_collection(Collection(name="rel", path="notes2"))
    assert sync_config_to_store(config, store, config_path="/cfg/qmd/index.yml", home="/h") is True
    assert store.get_collection("rel") == Collection(name="rel", path="/cfg/qmd/notes2")
    assert sync_config_to_store(config, store, config_path="/cfg/qmd/index.yml", home="/h") is False


def test_one_folder_for_a_relative_path_in_the_mirror_and_the_trust_gate(
    store: StoreLike, tmp_path: Path
) -> None:
    """A project-local `.qmd/index.yml`'s relative paths are taken against the project (the
    folder holding `.qmd`), by the mirror exactly as by the trust gate (REQ-CFG-SYNC-001);
    before, the mirror took them against `.qmd` itself."""
    project = tmp_path / "p"
    (project / ".qmd").mkdir(parents=True)
    local = str(project / ".qmd" / "index.yml")
    raw = {"docs": "docs", "dotted": "./docs/../docs", "up": "..", "out": "../outside"}
    config = QmdConfig(collections={n: Collection(name=n, path=p) for n, p in raw.items()})
    assert sync_config_to_store(config, store, config_path=local, home="/h") is True
    stored = {c.name: c.path for c in store.list_collections()}
    assert stored == {
        "docs": str(project / "docs"),
        "dotted": str(project / "docs"),
        "up": str(tmp_path),
        "out": str(tmp_path / "outside"),
    }
    gated = gated_items(config, local, {}, "/h")
    assert [name for name, _ in gated.paths] == ["up", "out"]
    for name, path in raw.items():
        assert collection_folder(path, local, "/h") == stored[name]
        inside = stored[name] == str(project) or stored[name].startswith(f"{project}/")
        assert is_inside_project(local, path, "/h") is inside, name
    # your own config (not in a `.qmd` folder): its own folder is the base
    assert collection_folder("notes", "/cfg/qmd/index.yml") == "/cfg/qmd/notes"


def test_a_mirror_of_an_older_folder_rule_is_synced_again(store: StoreLike) -> None:
    config = QmdConfig(collections={"docs": Collection(name="docs", path="docs")})
    store.put_collection(Collection(name="docs", path="/p/.qmd/docs"))  # the rule before
    store.set_config_value("config_hash", config_hash(config))
    assert sync_config_to_store(config, store, config_path="/p/.qmd/index.yml") is True
    assert store.get_collection("docs") == Collection(name="docs", path="/p/docs")
    assert sync_config_to_store(config, store, config_path="/p/.qmd/index.yml") is False


def test_every_save_through_the_repository_leaves_the_mirror_in_step(
    store: StoreLike, tmp_path: Path
) -> None:
    """`YamlConfigRepository` with its index: after each save the stored `config_hash` is the
    hash of the file as the next command reads it, so that command skips the sync
    (REQ-CFG-SYNC-002)."""
    path = tmp_path / "config" / "index.yml"
    repo = YamlConfigRepository(path, mirror=store, home="/h")

    def in_step() -> None:
        on_disk = load_config(path)
        assert store.get_config_value("config_hash") == config_hash(on_disk)
        assert sync_config_to_store(on_disk, store, config_path=path, home="/h") is False

    repo.save_collection(Collection(name="notes", path="/srv/notes"))
    in_step()
    repo.save_collection(FULL)
    in_step()
    repo.rename_collection("notes", "journal")
    in_step()
    repo.save_global_context("Everything «here»")
    in_step()
    repo.delete_collection("journal")
    in_step()
    assert [c.name for c in store.list_collections()] == ["docs"]
    assert store.get_global_context() == "Everything «here»"

    # a write that fails leaves no hash behind: the next command syncs from the file
    edited = load_config(path).with_collection(Collection(name="notes", path="/srv/notes"))
    path.unlink()
    path.mkdir()  # a folder of that name: the new file cannot take its place
    with pytest.raises(OSError):
        repo.save(edited)
    assert store.get_config_value("config_hash") is None
