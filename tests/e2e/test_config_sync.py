"""`index.yml` and the index's mirror of it stay in step, with real `qmd` processes:

- every command that edits `index.yml` leaves the index's `config_hash` equal to the hash of the
  file, so the next command does not sync again, and a hand edit back to an older file is
  mirrored (REQ-CFG-SYNC-002);
- a relative collection path of a project-local `.qmd/index.yml` names one folder, the same for
  the trust gate and for indexing, whichever folder `qmd` runs in (REQ-CFG-SYNC-001).
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from adapters.config.yaml_config import config_hash, load_config
from tests.e2e.conftest import Qmd


def _qmd(tmp_path: Path) -> Qmd:
    (tmp_path / "home").mkdir()
    return Qmd(tmp_path, tmp_path)


def _note(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
    return folder


def _stored(db: Path, query: str) -> list[tuple[str, ...]]:
    with sqlite3.connect(db) as connection:
        return [tuple(row) for row in connection.execute(query)]


def _stored_hash(db: Path) -> str | None:
    rows = _stored(db, "SELECT value FROM store_config WHERE key = 'config_hash'")
    return rows[0][0] if rows else None


def _listed(qmd: Qmd) -> set[str]:
    return set(re.findall(r"^(\S+) \(qmd://", qmd.ok("collection", "list"), re.MULTILINE))


def test_every_config_edit_leaves_the_stored_hash_that_of_the_file(tmp_path: Path) -> None:
    qmd = _qmd(tmp_path)
    notes = _note(tmp_path / "notes", "a.md", "alpha")
    more = _note(tmp_path / "more", "b.md", "beta")
    config = qmd.config_dir / "index.yml"
    edits = [
        ("collection", "add", str(notes), "--name", "notes"),
        ("collection", "add", str(more), "--name", "more"),
        ("collection", "rename", "more", "more2"),
        ("context", "add", "qmd://notes/", "Notes of the team"),
        ("context", "add", "/", "Everything"),
        ("context", "rm", "qmd://notes/"),
        ("context", "rm", "/"),
        ("collection", "exclude", "notes"),
        ("collection", "include", "notes"),
        ("collection", "update-cmd", "notes", "true"),
        ("collection", "remove", "more2"),
    ]
    for edit in edits:
        qmd.ok(*edit)
        # the next command would sync again exactly when these differ
        assert _stored_hash(qmd.db) == config_hash(load_config(config)), edit
    assert _listed(qmd) == {"notes"}
    assert _stored(qmd.db, "SELECT name, path FROM store_collections") == [("notes", str(notes))]


def test_a_hand_edit_back_to_the_file_before_an_add_is_mirrored(tmp_path: Path) -> None:
    """The stale hash of before: the file edited back to what it was before `collection add`
    hashed like the stored value, so the added collection stayed in the index."""
    qmd = _qmd(tmp_path)
    qmd.ok("collection", "add", str(_note(tmp_path / "notes", "a.md", "alpha")), "--name", "notes")
    qmd.ok("status")
    config = qmd.config_dir / "index.yml"
    before = config.read_bytes()
    qmd.ok("collection", "add", str(_note(tmp_path / "more", "b.md", "beta")), "--name", "more")
    # read without a command of ours, which would sync
    assert {name for (name,) in _stored(qmd.db, "SELECT name FROM store_collections")} == {
        "notes",
        "more",
    }
    config.write_bytes(before)  # the user takes the addition back by hand
    assert _listed(qmd) == {"notes"}


def test_a_relative_path_of_a_local_config_is_one_folder_for_trust_and_indexing(
    tmp_path: Path,
) -> None:
    qmd = _qmd(tmp_path)
    project = tmp_path / "project"
    docs = _note(project / "docs", "a.md", "lighthousealpha")
    outside = _note(tmp_path / "outside", "o.md", "zebraoutside")
    (project / ".qmd").mkdir()
    (project / ".qmd" / "index.yml").write_text(
        "collections:\n  docs:\n    path: docs\n  out:\n    path: ../outside\n", encoding="utf-8"
    )
    elsewhere = project / "sub" / "deeper"  # neither the project nor the config's folder
    elsewhere.mkdir(parents=True)

    updated = qmd.ok("update", cwd=elsewhere)
    # the gate withholds `out` and names the folder it judged: the one indexing would read
    assert f"Skipping collection 'out' — path {outside} is outside this project" in updated
    db = project / ".qmd" / "index.sqlite"
    assert dict(_stored(db, "SELECT name, path FROM store_collections")) == {
        "docs": str(docs),
        "out": str(outside),
    }
    hits = json.loads(qmd.ok("search", "lighthousealpha", "--json", cwd=elsewhere))
    assert [hit["file"] for hit in hits] == ["qmd://docs/a.md"]

    # approved, `out` is indexed from that same folder
    trusted = qmd.run("update", cwd=elsewhere, QMD_TRUST_LOCAL_CONFIG="1")
    assert trusted.returncode == 0, trusted.stderr
    found = qmd.run("search", "zebraoutside", "--json", cwd=project, QMD_TRUST_LOCAL_CONFIG="1")
    assert [hit["file"] for hit in json.loads(found.stdout)] == ["qmd://out/o.md"]
