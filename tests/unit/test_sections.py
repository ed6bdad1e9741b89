"""Chunk rows: sections cover every line of a document exactly once, in order, without overlap
(REQ-PROJMEM-CHUNK-001), and `qmd update` after edits leaves no orphan or stale rows
(REQ-PROJMEM-CHUNK-002)."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.sections import MAX_SECTION_CHARS, document_lines, line_of_offset, split_sections
from tests.mcp_harness import fixture_env

LINE = st.one_of(
    st.sampled_from(
        [
            "",
            "# Top",
            "## Mid",
            "### Low",
            "#### Deep",
            "####### seven",
            "#tag",
            "```",
            "~~~",
            " # indented",
        ]
    ),
    st.text(alphabet="ab #`\t", max_size=40),
    st.text(max_size=300),
)
BODY = st.builds(
    lambda lines, newline: "\n".join(lines) + ("\n" if newline else ""),
    st.lists(LINE, max_size=60),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(BODY, st.integers(min_value=20, max_value=MAX_SECTION_CHARS))
def test_sections_cover_every_line_once_in_order(body: str, max_chars: int) -> None:
    lines = document_lines(body)
    sections = split_sections(body, max_chars)
    covered = [n for s in sections for n in range(s.start_line, s.end_line + 1)]
    assert covered == list(range(1, len(lines) + 1))
    for seq, section in enumerate(sections):
        assert section.seq == seq
        assert section.text == "\n".join(lines[section.start_line - 1 : section.end_line])
        # a piece is cut only where the next line would overflow it
        # over the size limit only when a single line is longer than it
        assert section.end_line == section.start_line or len(section.text) + 1 <= max_chars


def test_heading_paths_follow_the_tree_and_skip_fenced_code() -> None:
    body = "intro\n# A\n## B\n```\n# not\n```\n### C\n## D\n# E\n"
    got = [(s.heading_path, s.start_line, s.end_line) for s in split_sections(body)]
    assert got == [
        ("", 1, 1),
        ("A", 2, 2),
        ("A > B", 3, 6),
        ("A > B > C", 7, 7),
        ("A > D", 8, 8),
        ("E", 9, 9),
    ]


def test_line_of_offset() -> None:
    assert [line_of_offset("ab\ncd\n", i) for i in (0, 2, 3, 5, 99)] == [1, 1, 2, 2, 3]


FILES = st.dictionaries(
    st.sampled_from(["a.md", "b.md", "sub/c.md", "sub/d.md"]),
    st.lists(st.sampled_from(["# H", "## I", "text", "more text"]), min_size=1, max_size=8).map(
        "\n".join
    ),
    max_size=4,
)


@settings(max_examples=12, deadline=None)
@given(st.lists(FILES, min_size=1, max_size=4))
def test_update_after_edits_leaves_no_orphan_rows(rounds: list[dict[str, str]]) -> None:
    from adapters.bootstrap import build_app

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "docs"
        folder.mkdir()
        env = fixture_env(root)
        app = build_app(env=env, with_models=False)
        try:
            app.collections.add(str(folder), "docs")
            for files in rounds:
                for old in folder.rglob("*.md"):
                    old.unlink()
                for name, text in files.items():
                    (folder / name).parent.mkdir(parents=True, exist_ok=True)
                    (folder / name).write_text(text, encoding="utf-8")
                app.collections.update()
                _assert_rows_match(Path(env["INDEX_PATH"]))
            assert app.maintenance is not None and app.chunk_keeper is not None
            app.maintenance.cleanup()
            app.chunk_keeper.sync()
            _assert_rows_match(Path(env["INDEX_PATH"]))
        finally:
            app.close()


def _assert_rows_match(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        orphans = conn.execute(
            "SELECT COUNT(*) FROM pyqmd_chunks c WHERE NOT EXISTS (SELECT 1 FROM documents d "
            "WHERE d.id = c.doc_id AND d.active = 1 AND d.hash = c.hash)"
        ).fetchone()[0]
        assert orphans == 0
        for doc_id, body in conn.execute(
            "SELECT d.id, content.doc FROM documents d JOIN content ON content.hash = d.hash "
            "WHERE d.active = 1"
        ):
            rows = conn.execute(
                "SELECT heading_path, start_line, end_line, text FROM pyqmd_chunks "
                "WHERE doc_id = ? ORDER BY seq",
                (doc_id,),
            ).fetchall()
            expected = [
                (s.heading_path, s.start_line, s.end_line, s.text) for s in split_sections(body)
            ]
            assert rows == expected
    finally:
        conn.close()


def test_adding_a_collection_cuts_its_chunk_rows() -> None:
    """`collection add` indexes through the manager's `index`, which the chunk-keeping
    manager extends: the rows are there before any `qmd update` (projmem's search names the
    section that matched from them)."""
    from adapters.bootstrap import build_app

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "docs"
        folder.mkdir()
        (folder / "a.md").write_text("# Title\n\nbody\n\n## Part\n\nmore\n", encoding="utf-8")
        env = fixture_env(root)
        app = build_app(env=env, with_models=False)
        try:
            app.collections.add(str(folder), "docs", refuse_unmatched=True)
        finally:
            app.close()
        conn = sqlite3.connect(Path(env["INDEX_PATH"]))
        try:
            assert conn.execute("SELECT COUNT(*) FROM pyqmd_chunks").fetchone()[0] == 2
        finally:
            conn.close()
        _assert_rows_match(Path(env["INDEX_PATH"]))
