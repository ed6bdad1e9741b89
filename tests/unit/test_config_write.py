"""Writing `index.yml` never touches another writer's temporary file."""

from __future__ import annotations

from pathlib import Path

from adapters.config.yaml_config import QmdConfig, load_config, save_config
from domain.model import Collection


def test_a_save_leaves_another_writers_temporary_file_alone(tmp_path: Path) -> None:
    target = tmp_path / "index.yml"
    # another process half-way through its own write (before: both used `index.yml.tmp`, so
    # one overwrote the other's text and the second rename failed with FileNotFoundError)
    theirs = tmp_path / "index.yml.tmp"
    theirs.write_text("collections: {}\n", encoding="utf-8")
    notes = Collection(name="notes", path=str(tmp_path), pattern="**/*.md")
    save_config(target, QmdConfig().with_collection(notes))
    assert theirs.read_text(encoding="utf-8") == "collections: {}\n"
    assert list(load_config(target).collections) == ["notes"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.yml", "index.yml.tmp"]
