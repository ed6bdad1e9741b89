"""ContentSource contract: FakeContentSource and FileSystemSource list and read files alike."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapters.fs.clock import SystemClock
from adapters.fs.content_source import FileSystemSource
from domain.indexing import SkippedFile, Unreadable
from domain.model import Collection
from tests.fakes import FakeContentSource, FixedClock

FILES = {
    "a.md": "# A\n",
    "sub/b.md": "# B\n",
    "sub/deep/c.md": "# C\n",
    "notes/n.txt": "text\n",
    "top.txt": "top\n",
    "UPPER.MD": "# upper\n",
    ".hidden.md": "# hidden\n",
    ".dir/x.md": "# x\n",
    "sub/.private/y.md": "# y\n",
    "node_modules/pkg/readme.md": "# pkg\n",
    "sub/build/out.md": "# out\n",
    "dist/d.md": "# d\n",
    "vendor/v.md": "# v\n",
    "drafts/wip.md": "# wip\n",
    "blank.md": "   \n\n",
    "日本/ノート.md": "# 日本\n",
    "with space.md": "# space\n",
}

Source = FakeContentSource | FileSystemSource


@pytest.fixture(params=["fake", "fs"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Source, str]:
    root = str(tmp_path / "corpus")
    if request.param == "fake":
        return FakeContentSource({f"{root}/{rel}": text for rel, text in FILES.items()}), root
    for rel, text in FILES.items():
        target = Path(root) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return FileSystemSource(), root


def listed(source: tuple[Source, str], pattern: str, ignore: tuple[str, ...] = ()) -> list[str]:
    impl, root = source
    return [
        f.relative_path
        for f in impl.scan(Collection(name="c", path=root, pattern=pattern, ignore=ignore)).files
    ]


def test_default_pattern_skips_dot_and_excluded_dirs(source: tuple[Source, str]) -> None:
    # the original's scan order: breadth first, names in byte order (upper case first)
    assert listed(source, "**/*.md") == [
        "a.md",
        "blank.md",
        "with space.md",
        "drafts/wip.md",
        "sub/b.md",
        "日本/ノート.md",
        "sub/deep/c.md",
    ]


def test_masks_commas_braces_and_ignores(source: tuple[Source, str]) -> None:
    assert listed(source, "*.md,notes/*.txt") == [
        "a.md",
        "blank.md",
        "with space.md",
        "notes/n.txt",
    ]
    assert listed(source, "**/*.{md,txt}", ignore=("drafts/**", "**/deep/**")) == [
        "a.md",
        "blank.md",
        "top.txt",
        "with space.md",
        "notes/n.txt",
        "sub/b.md",
        "日本/ノート.md",
    ]
    assert listed(source, "sub/*.md") == ["sub/b.md"]
    assert listed(source, "*.MD") == ["UPPER.MD"]


def test_source_file_fields(source: tuple[Source, str]) -> None:
    impl, root = source
    scan = impl.scan(Collection(name="c", path=root, pattern="sub/*.md"))
    files, skipped = scan.files, scan.skipped
    assert len(files) == 1 and skipped == []
    found = files[0]
    assert found.absolute_path == os.path.join(root, "sub", "b.md")
    assert found.size == len(b"# B\n")
    for stamp in (found.created_at, found.modified_at):
        assert len(stamp) == 24 and stamp.endswith("Z") and stamp[19] == "."


def test_read_text_and_is_directory(source: tuple[Source, str]) -> None:
    impl, root = source
    assert impl.read_text(os.path.join(root, "日本", "ノート.md")) == "# 日本\n"
    assert impl.read_text(os.path.join(root, "blank.md")) == "   \n\n"
    missing = impl.read_text(os.path.join(root, "missing.md"))
    assert isinstance(missing, Unreadable) and missing.reason.startswith("cannot be read: ")
    assert missing.transient
    assert impl.is_directory(root)
    assert impl.is_directory(os.path.join(root, "sub"))
    assert not impl.is_directory(os.path.join(root, "a.md"))
    assert not impl.is_directory(os.path.join(root, "nope"))


def test_fs_skips_symlinks_and_replaces_bad_utf8(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text("# secret\n")
    (root / "real.md").write_text("# real\n")
    (root / "link.md").symlink_to(outside / "secret.md")
    (root / "inner-link.md").symlink_to(root / "real.md")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    (root / "bad.md").write_bytes(b"\xff\xfe bad \xc3\n")
    source = FileSystemSource()
    scan = source.scan(Collection(name="c", path=str(root)))
    assert [f.relative_path for f in scan.files] == ["bad.md", "real.md"]
    assert scan.skipped == [
        SkippedFile("inner-link.md", "symbolic link (links are not followed)"),
        SkippedFile("link.md", "symbolic link (links are not followed)"),
    ]
    assert source.read_text(str(root / "bad.md")) == "\ufffd\ufffd bad \ufffd\n"
    gone = source.scan(Collection(name="c", path=str(tmp_path / "missing")))
    assert gone.files == [] and gone.unlisted == [""]
    assert gone.skipped == [SkippedFile("(collection folder)", f"not found: {tmp_path}/missing")]


@pytest.mark.parametrize("clock", [FixedClock("2025-05-05T05:05:05.005Z"), SystemClock()])
def test_clock_format(clock: FixedClock | SystemClock) -> None:
    stamp = clock.now_iso()
    assert len(stamp) == 24 and stamp[10] == "T" and stamp.endswith("Z") and stamp[19] == "."


def test_a_missing_collection_folder_is_unlisted_not_empty(source: tuple[Source, str]) -> None:
    impl, root = source
    gone = impl.scan(Collection(name="c", path=root + "-gone"))
    assert gone.files == [] and gone.unlisted == [""]
    assert [s.path for s in gone.skipped] == ["(collection folder)"]


@pytest.mark.parametrize("pattern", ["**/*.md", "**/*", "sub/*.md,*.txt"])
def test_a_scan_without_stamps_finds_the_same_files(
    source: tuple[Source, str], pattern: str
) -> None:
    """`stamps=False` (what `qmd ls` asks for): the same files, order and skips, no times."""
    impl, root = source
    collection = Collection(name="c", path=root, pattern=pattern)
    full, bare = impl.scan(collection), impl.scan(collection, stamps=False)
    assert [(f.relative_path, f.absolute_path) for f in bare.files] == [
        (f.relative_path, f.absolute_path) for f in full.files
    ]
    assert (bare.skipped, bare.unlisted) == (full.skipped, full.unlisted)
    assert {(f.created_at, f.modified_at, f.size, f.stamp) for f in bare.files} == {
        ("", "", 0, None)
    }


def test_fs_without_stamps_skips_links_pipes_and_bad_names_alike(tmp_path: Path) -> None:
    """The file type comes from the folder listing instead of a stat: same reasons."""
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "real.md").write_text("# real\n")
    (root / "link.md").symlink_to(root / "real.md")
    (root / "linkdir").symlink_to(root / "sub", target_is_directory=True)
    os.mkfifo(root / "sub" / "pipe.md")
    (root / os.fsdecode(b"bad-\xff.md")).write_text("# bad name\n")
    (root / "sub" / "line\nbreak.md").write_text("# control\n")
    source = FileSystemSource()
    collection = Collection(name="c", path=str(root))
    bare = source.scan(collection, stamps=False)
    assert [f.relative_path for f in bare.files] == ["real.md"]
    assert bare.skipped == [
        SkippedFile("bad-\\xff.md", "file name is not valid UTF-8"),
        SkippedFile("link.md", "symbolic link (links are not followed)"),
        SkippedFile(
            "sub/line\\nbreak.md", "file name contains control characters (such as a newline)"
        ),
        SkippedFile("sub/pipe.md", "not a regular file"),
    ]
    assert bare.skipped == source.scan(collection).skipped


def test_known_files_are_left_out_but_still_checked(source: tuple[Source, str]) -> None:
    """`known` (the paths `qmd ls` has just listed) leaves those files out of `files` alone."""
    impl, root = source
    collection = Collection(name="c", path=root, pattern="**/*")
    full = impl.scan(collection)
    known = {"a.md", "sub/b.md", "not/there.md"}
    rest = impl.scan(collection, stamps=False, known=known)
    assert [f.relative_path for f in rest.files] == [
        f.relative_path for f in full.files if f.relative_path not in known
    ]
    assert rest.skipped == full.skipped


def test_fs_a_known_path_that_became_a_link_is_still_skipped(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "real.md").write_text("# real\n")
    (root / "was-a-file.md").symlink_to(root / "real.md")
    rest = FileSystemSource().scan(
        Collection(name="c", path=str(root)), stamps=False, known={"real.md", "was-a-file.md"}
    )
    assert rest.files == []
    assert rest.skipped == [SkippedFile("was-a-file.md", "symbolic link (links are not followed)")]
