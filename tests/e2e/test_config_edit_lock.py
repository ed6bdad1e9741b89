"""Commands that edit `index.yml` take the index's writer lock, as `qmd update` and
`qmd collection add` do, so that edits made at the same time are all kept.

Each edit reads the file, changes it and writes it back. Before, only `collection add` held
the lock: six `qmd context add` run at once kept one context, and `qmd collection remove` run
beside another one reported success while its collection stayed in `index.yml` (found by a
user trial). Real `qmd` processes.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from adapters.cli.runtime import file_lock
from adapters.config.yaml_config import load_config
from tests.e2e.conftest import Qmd, qmd_command

EDITS = 6


def _qmd(tmp_path: Path) -> Qmd:
    (tmp_path / "home").mkdir()
    return Qmd(tmp_path, tmp_path)


def _folders(qmd: Qmd, count: int) -> list[str]:
    names = []
    for i in range(count):
        folder = qmd.root / "docs" / f"f{i}"
        folder.mkdir(parents=True)
        (folder / "a.md").write_text(f"# note {i}\n\nword{i}\n", encoding="utf-8")
        qmd.ok("collection", "add", str(folder), "--name", f"c{i}")
        names.append(f"c{i}")
    return names


def _start(qmd: Qmd, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*qmd_command(), *args],
        cwd=qmd.root,
        env=qmd.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, (process.args, out, err)
    return err


def test_config_edits_wait_for_the_index_writer_lock(tmp_path: Path) -> None:
    qmd = _qmd(tmp_path)
    _folders(qmd, 3)
    edits = [
        ("context", "add", "qmd://c0/", "first folder"),
        ("context", "rm", "qmd://c0/"),
        ("collection", "remove", "c1"),
        ("collection", "rename", "c2", "renamed"),
        ("collection", "exclude", "renamed"),
        ("collection", "update-cmd", "renamed", "true"),
    ]
    for edit in edits:
        with file_lock(str(qmd.db), "update", wait=True):
            process = _start(qmd, *edit)
            time.sleep(1.0)  # time enough to write index.yml, had it not waited
            assert process.poll() is None, (edit, process.communicate())
        err = _finish(process)
        assert "Another update of the index" in err, (edit, err)
    config = load_config(qmd.config_dir / "index.yml")
    assert sorted(config.collections) == ["c0", "renamed"]
    assert not config.collections["c0"].contexts
    assert not config.collections["renamed"].include_by_default
    assert config.collections["renamed"].update_command == "true"


def test_concurrent_config_edits_are_all_kept(tmp_path: Path) -> None:
    qmd = _qmd(tmp_path)
    names = _folders(qmd, EDITS)
    contexts = [
        _start(qmd, "context", "add", f"qmd://c0/part{i}", f"part {i}") for i in range(EDITS)
    ]
    removals = [_start(qmd, "collection", "remove", name) for name in names[1:]]
    for process in contexts + removals:
        _finish(process)
    config = load_config(qmd.config_dir / "index.yml")
    assert sorted(config.collections) == ["c0"]
    assert sorted(config.collections["c0"].contexts) == [f"part{i}" for i in range(EDITS)]
    listed = qmd.ok("collection", "list")
    assert all(f"{name} (qmd://" not in listed for name in names[1:]), listed


def test_an_edit_starts_from_the_file_not_from_an_older_mirror(tmp_path: Path) -> None:
    """REQ-CFG-SYNC-003: a command mirrors index.yml at start, unlocked; one that read the file
    before another's edit can mirror the older state after it. The waiting edit must not start
    from that older mirror (this dropped a context now and then when six ran at once)."""
    from adapters.bootstrap import build_app
    from adapters.config.yaml_config import sync_config_to_store

    qmd = _qmd(tmp_path)
    _folders(qmd, 1)
    older = load_config(qmd.config_dir / "index.yml")
    qmd.ok("context", "add", "qmd://c0/kept", "written before")
    with file_lock(str(qmd.db), "update", wait=True):
        process = _start(qmd, "context", "add", "qmd://c0/new", "written after")
        assert process.stderr is not None
        waiting = process.stderr.readline()  # the edit is past its start-up sync, at the lock
        assert "Another update of the index" in waiting, waiting
        app = build_app(None, qmd.env(), with_models=False)
        try:  # what a command that read the file before `kept` was added writes late
            assert app.storage is not None
            sync_config_to_store(older, app.storage.index, force=True, config_path=app.config_path)
        finally:
            app.close()
    _finish(process)
    config = load_config(qmd.config_dir / "index.yml")
    assert sorted(config.collections["c0"].contexts) == ["kept", "new"]
