"""Writing `index.yml` never touches another writer's temporary file."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.config.yaml_config import QmdConfig, load_config, save_config
from domain.errors import INVALID_ARGUMENT, QmdError
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


@pytest.mark.parametrize("kind", ["latin-1", "folder"])
def test_an_index_yml_that_cannot_be_read_is_invalid_argument(tmp_path: Path, kind: str) -> None:
    """Before: `qmd: internal error: UnicodeDecodeError: 'utf-8' codec can't decode …`."""
    target = tmp_path / "index.yml"
    if kind == "folder":
        target.mkdir()
    else:
        target.write_bytes("collections:\n  café:\n    path: /tmp\n".encode("latin-1"))
    with pytest.raises(QmdError) as refused:
        load_config(target)
    assert refused.value.code == INVALID_ARGUMENT
    assert refused.value.message.startswith(f"Failed to read {target}: ")
