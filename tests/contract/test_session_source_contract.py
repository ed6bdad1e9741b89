"""The SessionSource contract over the in-memory fake and the Claude Code JSONL adapter, and
the session use cases over fakes (REQ-PROJMEM-SESSION-001, REQ-PROJMEM-SESSION-002)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from adapters.fs.claude_sessions import ClaudeCodeSessions, parse_transcript
from domain.errors import QmdError
from domain.sessions import SessionRef, session_status, summary_note, validate_summary
from domain.usecases.sessions import SessionMemory, SessionStores
from tests.fakes import FixedClock, InMemoryChunkIndex, InMemorySessions, InMemoryStore
from tests.projmem_fixtures import CWD, PROJECT, install_sessions

NEWER, OLDER = "2b9f1c7e-auth-4a1d-9c3e-000000000001", "9e4f6a10-bad0-4c2d-8e5f-000000000003"


def _on_disk(tmp_path: Path) -> ClaudeCodeSessions:
    root = install_sessions(tmp_path / "projects")
    for session_id, when in ((NEWER, 2_000_000_000), (OLDER, 1_900_000_000)):
        os.utime(root / PROJECT / f"{session_id}.jsonl", (when, when))
    return ClaudeCodeSessions(str(root))


def _in_memory(tmp_path: Path) -> InMemorySessions:
    disk = _on_disk(tmp_path)
    transcripts = [disk.read_session(ref.session_id) for ref in disk.list_sessions()]
    return InMemorySessions([t for t in transcripts if t is not None])


@pytest.fixture(params=["fake", "claude-code"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return _in_memory(tmp_path) if request.param == "fake" else _on_disk(tmp_path)


def test_sessions_are_listed_newest_first_and_read_by_id(source: Any) -> None:
    refs = source.list_sessions()
    ids = [r.session_id for r in refs]
    assert ids[0] == NEWER and len(ids) == 4 and not any(i.startswith("agent-") for i in ids)
    assert [r.modified_at for r in refs] == sorted((r.modified_at for r in refs), reverse=True)
    transcript = source.read_session(NEWER)
    assert transcript is not None and transcript.ref == refs[0]
    assert [t.role for t in transcript.turns] == ["user", "assistant", "user", "assistant"]
    assert transcript.turns[1].tools == ("Read", "Write", "Bash")
    assert source.read_session("no-such-session") is None


def test_malformed_lines_are_counted_not_fatal() -> None:
    ref = SessionRef("s", "p", "2026-01-01T00:00:00.000Z")
    good = b'{"type":"user","timestamp":"2026-01-01T00:00:00Z","message":{"content":"hi"}}'
    data = good + b'\n\xff\xfe\n{"x":\n'
    transcript = parse_transcript(data, ref)
    assert transcript.skipped_lines == 2 and [t.text for t in transcript.turns] == ["hi"]


def test_status_active_within_thirty_minutes() -> None:
    ref = SessionRef("s", "p", "2026-01-01T00:00:00.000Z")
    data = b'{"type":"user","timestamp":"2026-01-01T10:00:00.000Z","message":{"content":"hi"}}\n'
    transcript = parse_transcript(data, ref)
    assert session_status(transcript, "2026-01-01T10:29:00.000Z") == "active"
    assert session_status(transcript, "2026-01-01T10:31:00.000Z") == "closed"


def test_session_memory_over_fakes(tmp_path: Path) -> None:
    from adapters.fs.claude_sessions import VaultFolder
    from domain.usecases.collections import CollectionManager
    from tests.fakes import FakeContentSource, InMemoryConfigRepository

    store = InMemoryStore()
    tables = InMemoryChunkIndex(store)
    manager = CollectionManager(
        store, InMemoryConfigRepository(), FakeContentSource({}), FixedClock()
    )
    vault = VaultFolder(str(tmp_path / "vault"))
    memory = SessionMemory(
        SessionStores(_in_memory(tmp_path), tables, vault), manager, FixedClock()
    )
    listed = memory.list_sessions(limit=2)
    assert len(listed) == 2 and listed[0].ref.session_id == NEWER
    with pytest.raises(QmdError, match="limit"):
        memory.list_sessions(limit=0)
    page = memory.transcript(None, 1, 2)
    assert page.next_turn == 3 and f"Session: {NEWER}" in page.text


def test_the_project_is_the_folder_the_session_worked_in(source: Any, tmp_path: Path) -> None:
    """REQ-PROJMEM-SESSION-003: `Project:` is the transcript's `cwd`, not the folder name
    Claude Code encodes it as (`-home-dev-projmem`), in the transcript, the list and the
    summary note alike."""
    from adapters.fs.claude_sessions import VaultFolder
    from domain.usecases.collections import CollectionManager
    from tests.fakes import FakeContentSource, InMemoryConfigRepository

    store = InMemoryStore()
    manager = CollectionManager(
        store, InMemoryConfigRepository(), FakeContentSource({}), FixedClock()
    )
    vault = VaultFolder(str(tmp_path / "vault"))
    stores = SessionStores(source, InMemoryChunkIndex(store), vault)
    memory = SessionMemory(stores, manager, FixedClock())
    page = memory.transcript(NEWER)
    assert f"\nProject: {CWD}\n" in page.text, page.text[:200]
    assert {s.project for s in memory.list_sessions(limit=10)} == {CWD}
    lists = {"decisions": [], "outcomes": [], "openItems": [], "tags": ["auth"]}
    summary = validate_summary(NEWER, {"overview": "Rotation.", **lists})
    note = summary_note(summary, source.read_session(NEWER))
    assert f"\nproject: {json.dumps(CWD)}\n" in note


def test_the_first_cwd_names_the_project_and_the_folder_name_stands_in_for_none() -> None:
    """A session that moves into a subfolder is still filed under the folder it started in;
    a transcript without any `cwd` keeps the folder name it was found under."""
    ref = SessionRef("s", "-home-dev-app", "2026-01-01T00:00:00.000Z")
    moved = b"\n".join(
        json.dumps(
            {"type": "user", "cwd": cwd, "timestamp": f"2026-01-01T00:0{n}:00Z", "message": m}
        ).encode()
        for n, cwd in enumerate(["/home/dev/app", "/home/dev/app/src"])
        for m in [{"content": f"turn {n}"}]
    )
    assert parse_transcript(moved, ref).project == "/home/dev/app"
    bare = b'{"type":"user","timestamp":"2026-01-01T00:00:00Z","message":{"content":"hi"}}'
    assert parse_transcript(bare, ref).project == "-home-dev-app"
