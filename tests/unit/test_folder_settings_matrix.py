"""A folder's files cannot change a server's security settings (REQ-SEC-ENV-004), generated
from the declared tables in tests/guarantees.py: every registered surface, both server
commands, every file a folder can carry that a server reads (`FOLDER_SOURCES`) and every class
of security setting (`SETTING_CLASSES`). What the server would run with is read through the
code `qmd mcp`/`qmd server` run at start (`server_view`), in a real working folder.

An approvable source (the working folder's `.env`) is also approved and edited: approval
changes the settings only on a surface that declares it reads that file
(`reads_working_env_file`), so each class is seen to be observable and every surface to read
through the one gate; an edit withdraws the approval."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapters.config.service import FOLDER_ENV_VARIABLES, read_env_file
from adapters.config.trust import TrustStore
from adapters.mcp.registry import reads_working_env_file
from tests.guarantees import (
    FOLDER_SOURCES,
    SETTING_CLASSES,
    FolderSource,
    process_variables,
    served_surfaces,
    server_view,
)

COMMANDS = (("mcp", "--http"), ("server", "--transport", "http"))


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout to start the server in, under a user whose environment names nothing."""
    # a checkout's parent holds no home folder, so `~/…` lies outside the project above too
    checkout = tmp_path / "work" / "checkout"
    (checkout / "docs").mkdir(parents=True)
    (tmp_path / "home" / "private").mkdir(parents=True)
    monkeypatch.setattr(os, "environ", {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin"})
    monkeypatch.chdir(checkout)
    return checkout


def _approve(folder: Path, source: FolderSource) -> None:
    assert source.approvable is not None
    path = str(folder / source.approvable)
    TrustStore(os.environ).record_env(path, read_env_file(path).digest)


def test_the_tables_cover_every_source_and_class() -> None:
    assert {s.name for s in FOLDER_SOURCES} >= {".env", ".qmd/index.yml"}
    assert set(SETTING_CLASSES) >= {"trust", "paths", "network", "watch", "models", "remote"}
    assert any(reads_working_env_file(surface) for surface in served_surfaces())
    declared = {name for table in SETTING_CLASSES.values() for name in table}
    assert not declared & FOLDER_ENV_VARIABLES  # nothing declared hostile is let through


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("kind", sorted(SETTING_CLASSES))
@pytest.mark.parametrize("source", FOLDER_SOURCES, ids=lambda s: s.name)
@pytest.mark.parametrize("surface", served_surfaces())
def test_a_folders_file_cannot_change_a_servers_security_settings(
    folder: Path, surface: str, source: FolderSource, kind: str, command: tuple[str, ...]
) -> None:
    argv = [*command, "--surface", surface]
    source.benign(folder)
    before = server_view(argv)
    source.hostile(folder, SETTING_CLASSES[kind], kind)
    assert server_view(argv) == before
    if source.approvable is None:
        return
    _approve(folder, source)
    approved = server_view(argv)
    if reads_working_env_file(surface):
        assert approved[kind] != before[kind], f"approving {source.name} changed no {kind}"
    else:
        assert approved == before  # this surface never reads the file
    with (folder / source.approvable).open("a", encoding="utf-8") as handle:
        handle.write("# edited\n")
    assert server_view(argv) == before


@pytest.mark.parametrize("surface", served_surfaces())
def test_no_variable_the_code_names_comes_from_an_unapproved_env(
    folder: Path, surface: str
) -> None:
    """Every upper-case name in the code, so a setting added later is covered unasked."""
    argv = ["mcp", "--http", "--surface", surface]
    before = server_view(argv)
    names = sorted(process_variables() - FOLDER_ENV_VARIABLES)
    assert len(names) > 40 and {"LDIMS_API_BASE_URL", "QMD_HOST", "INDEX_PATH"} <= set(names)
    (folder / ".env").write_text("".join(f"{n}=folder\n" for n in names), encoding="utf-8")
    assert server_view(argv) == before


def test_one_module_reads_env_files() -> None:
    """Every surface and command reads a `.env` through adapters/config/service.py, where the
    gate is; nothing else parses one or names the working folder's."""
    root = Path(__file__).resolve().parents[2]
    readers = sorted(
        str(path.relative_to(root))
        for folder in ("adapters", "domain")
        for path in (root / folder).rglob("*.py")
        if "dotenv" in (text := path.read_text(encoding="utf-8")) or "WORKING_ENV_FILE" in text
    )
    assert readers == ["adapters/config/service.py"]
