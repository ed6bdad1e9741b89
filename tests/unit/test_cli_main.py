"""The command line in-process, through `main(argv)`: the fast paths that need no subprocess
(the subprocess end-to-end tests stay in tests/e2e/test_cli.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adapters.cli.main import main
from adapters.version import IMPLEMENTS

REPO = Path(__file__).resolve().parents[2]
HANDBOOK = REPO / "fixtures" / "corpora" / "handbook"


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every file qmd touches lives under tmp_path for this test."""
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "QMD_EMBED_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("INDEX_PATH", str(tmp_path / "index.sqlite"))
    monkeypatch.setenv("QMD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.endswith(f"(implements QMD {IMPLEMENTS})\n")


def test_unknown_command_and_usage_mistakes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 1
    assert "Unknown command: frobnicate" in capsys.readouterr().err
    assert main(["search", "-n", "zero", "x"]) == 2
    assert "expected a positive integer, got 'zero'" in capsys.readouterr().err
    assert main([]) == 1
    assert "<command>" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["search", "vsearch", "query"])
@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_query_is_refused_with_the_usage_line(
    isolated: Path, capsys: pytest.CaptureFixture[str], command: str, text: str
) -> None:
    """As the original: exit 1 and its usage line (before: "No results found.", exit 0)."""
    assert main(["collection", "add", str(HANDBOOK), "--name", "handbook"]) == 0
    capsys.readouterr()
    assert main([command, text]) == 1
    captured = capsys.readouterr()
    assert f"Usage: qmd {command} [options] <query>" in captured.err
    assert "must not be empty" in captured.err
    assert "No results found" not in captured.out


def test_a_mask_that_matches_nothing_is_refused(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """REQ-INDEX-MASK-001. Before, a mistyped mask made an empty collection (an index.yml
    entry, a collection row) with only "Indexed: 0 new" to say so."""
    assert main(["collection", "add", str(HANDBOOK), "--name", "typo", "--mask", "**/*.MD"]) == 1
    said = capsys.readouterr()
    assert f"No file in {HANDBOOK} matches the mask '**/*.MD'; nothing was added." in said.err
    assert " .md" in said.err and "--mask '**/*.md'" in said.err  # the kinds found, a hint
    assert "created successfully" not in said.out
    config = isolated / "config" / "index.yml"
    assert not config.exists() or "typo" not in config.read_text(encoding="utf-8")
    assert main(["collection", "list"]) == 0
    assert "typo" not in capsys.readouterr().out
    # an empty folder is added: it is being set up to be filled later
    empty = isolated / "inbox"
    empty.mkdir()
    assert main(["collection", "add", str(empty), "--name", "inbox", "--mask", "*.txt"]) == 0
    said = capsys.readouterr()
    assert "holds no file yet" in said.err and "created successfully" in said.out
    assert main(["collection", "add", str(HANDBOOK), "--name", "handbook"]) == 0
    assert "nothing was added" not in capsys.readouterr().err


@pytest.mark.parametrize("what", ["not a database", "a folder", "under a file"])
def test_an_index_path_that_cannot_be_opened_is_said_plainly(
    isolated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """Before: `qmd: internal error: DatabaseError: file is not a database`."""
    garbage = isolated / "notes.txt"
    garbage.write_text("not an index\n", encoding="utf-8")
    path = {"not a database": garbage, "a folder": isolated, "under a file": garbage / "x"}[what]
    monkeypatch.setenv("INDEX_PATH", str(path))
    for argv in (["status"], ["search", "x"], ["collection", "add", str(HANDBOOK)]):
        assert main(argv) == 1
        said = capsys.readouterr().err
        assert f"qmd: cannot open the index {path}: " in said, said
        assert "internal error" not in said
    assert garbage.read_text(encoding="utf-8") == "not an index\n"


def test_index_search_get_and_status(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collection", "add", str(HANDBOOK), "--name", "handbook"]) == 0
    capsys.readouterr()
    assert main(["search", "rate limits", "--format", "files"]) == 0
    found = capsys.readouterr().out
    assert "qmd://handbook/engineering/api/rate limits.md" in found
    assert main(["get", "handbook/README.md", "-l", "2"]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["status"]) == 0
    assert "handbook (qmd://handbook/)" in capsys.readouterr().out
    assert main(["cleanup", "--dry-run"]) == 0
    assert "Dry run — no changes made." in capsys.readouterr().out


def test_an_unknown_surface_is_refused_before_anything_starts(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "--surface", "nonesuch"]) == 2
    assert "Unknown MCP surface 'nonesuch'" in capsys.readouterr().err
    assert main(["mcp", "--compat", "2.8.3", "--surface", "spec"]) == 2
    assert "--compat and --surface name different surfaces" in capsys.readouterr().err


def test_cli_reference_table_matches_the_grammar() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_cli_reference.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_get_suggests_a_file_typed_without_its_folders(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """REQ-SPEC-GET-NAME-001: `qmd get v18.0.md` in a blog whose release notes live under
    `release/` suggests `release/v18.0.0.md` (the whole path is ten edits away)."""
    blog = isolated / "blog"
    (blog / "release").mkdir(parents=True)
    for version in ("v18.0.0", "v18.1.0", "v20.0.0"):
        (blog / "release" / f"{version}.md").write_text(f"# Node {version}\n", encoding="utf-8")
    assert main(["collection", "add", str(blog), "--name", "blog"]) == 0
    capsys.readouterr()
    assert main(["get", "v18.0.md"]) == 1
    said = capsys.readouterr().err
    assert said.startswith("Document not found: v18.0.md\nSimilar files:\n  release/v18.0.0.md\n")
