"""`qmd ls` says which files of the folder it does not list, and why (REQ-INDEX-LS-SKIPPED-001):
a real `qmd` process over a folder with a binary file, a file over 10 MiB, a blank one and one
added after the last update. stdout keeps the original's listing of what is indexed."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Qmd

LIMIT = 10 * 1024 * 1024  # the indexing size limit (ADR 0022)


def _folder(root: Path) -> Path:
    notes = root / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "a.md").write_text("# Alpha\n\nalpha words\n", encoding="utf-8")
    (notes / "sub" / "b.md").write_text("# Beta\n\nbeta words\n", encoding="utf-8")
    (notes / "sub" / "binary.md").write_bytes(b"# Looks like markdown\n\x00\x01\x02 binary\n")
    (notes / "big.md").write_text("# Big\n\n" + "word " * (LIMIT // 5 + 10), encoding="utf-8")
    (notes / "blank.md").write_text("   \n", encoding="utf-8")
    return notes


def test_ls_names_the_files_update_skipped_and_why(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    qmd = Qmd(tmp_path, _folder(tmp_path))
    added = qmd.run("collection", "add", str(qmd.corpus), "--name", "notes")
    assert added.returncode == 0, added.stderr
    assert "big.md: file too large" in added.stderr  # what update says, to compare with

    listed = qmd.run("ls", "notes")
    assert listed.returncode == 0, listed.stderr
    # stdout: the original's listing of the indexed files, nothing else
    lines = listed.stdout.splitlines()
    assert [line.split("  ")[-1] for line in lines] == ["qmd://notes/a.md", "qmd://notes/sub/b.md"]
    assert listed.stderr == (
        "Not listed: 2 file(s) under qmd://notes/ are not indexed:\n"
        f"  big.md: file too large ({(qmd.corpus / 'big.md').stat().st_size:,} bytes; "
        f"the limit is {LIMIT:,} bytes)\n"
        "  sub/binary.md: binary file (contains NUL bytes)\n"
    )

    # a prefix narrows both; a file added since the update is named as such
    (qmd.corpus / "sub" / "c.md").write_text("# Gamma\n\ngamma\n", encoding="utf-8")
    under = qmd.run("ls", "notes/sub")
    assert under.returncode == 0
    assert under.stdout.splitlines()[0].endswith("qmd://notes/sub/b.md")
    assert under.stderr == (
        "Not listed: 2 file(s) under qmd://notes/sub are not indexed:\n"
        "  sub/binary.md: binary file (contains NUL bytes)\n"
        "  sub/c.md: not indexed yet (new since the last 'qmd update')\n"
    )
    assert qmd.run("update").returncode == 0
    after = qmd.run("ls", "qmd://notes/sub")
    assert "qmd://notes/sub/c.md" in after.stdout
    assert after.stderr == (
        "Not listed: 1 file(s) under qmd://notes/sub are not indexed:\n"
        "  sub/binary.md: binary file (contains NUL bytes)\n"
    )

    # nothing left out: nothing said; the collections view is the original's
    clean = Qmd(tmp_path / "clean", tmp_path / "clean" / "notes")
    (clean.root / "home").mkdir(parents=True)
    clean.corpus.mkdir()
    (clean.corpus / "a.md").write_text("# Alpha\n\nalpha\n", encoding="utf-8")
    clean.ok("collection", "add", str(clean.corpus), "--name", "notes")
    quiet = clean.run("ls", "notes")
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert qmd.ok("ls") == "Collections:\n\n  qmd://notes/  (3 files)\n"
