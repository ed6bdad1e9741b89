"""Transcripts are streamed and list figures cached (REQ-PROJMEM-SESSION-005, issue 22
finding 9): reading a page of a large Claude Code transcript holds one line and one page,
not the file; `session_list` with a status filter reads an unchanged transcript once."""

from __future__ import annotations

import json
import tracemalloc
from dataclasses import replace
from pathlib import Path

from adapters.bootstrap import App, ProjmemAdapters
from adapters.fs.claude_sessions import MAX_LINE_BYTES, ClaudeCodeSessions, VaultFolder
from domain.sessions import SessionRef, Transcript, Turn, TurnWindow
from domain.usecases.sessions import SessionMemory, SessionStores
from tests.fakes import (
    FakeContentSource,
    FixedClock,
    InMemoryChunkIndex,
    InMemoryConfigRepository,
    InMemorySessions,
    InMemoryStore,
)

PROJECT = "-home-dev-big"
LATER = "2026-06-01T00:00:00.000Z"  # every session here was last written long before
SESSION = "big-0000-4000-8000-000000000001"


def _write_transcript(path: Path, turns: int, text_bytes: int) -> int:
    """A transcript of `turns` user/assistant pairs; returns its size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    filler = "kettle " * (text_bytes // 7)
    with open(path, "w", encoding="utf-8") as out:
        for n in range(turns):
            stamp = f"2026-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z"
            user = {
                "type": "user",
                "timestamp": stamp,
                "message": {"role": "user", "content": f"question {n} {filler}"},
            }
            reply = {
                "type": "assistant",
                "timestamp": stamp,
                "message": {"role": "assistant", "content": [{"type": "text", "text": filler}]},
            }
            out.write(json.dumps(user) + "\n" + json.dumps(reply) + "\n")
    return path.stat().st_size


def _memory(sessions: ClaudeCodeSessions, tmp_path: Path) -> SessionMemory:
    from domain.usecases.collections import CollectionManager

    store = InMemoryStore()
    manager = CollectionManager(
        store, InMemoryConfigRepository(), FakeContentSource({}), FixedClock()
    )
    vault = VaultFolder(str(tmp_path / "v"))
    stores = SessionStores(sessions, InMemoryChunkIndex(store), vault)
    return SessionMemory(stores, manager, FixedClock(LATER))


def test_a_page_of_a_large_transcript_takes_bounded_memory(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    size = _write_transcript(root / PROJECT / f"{SESSION}.jsonl", turns=6000, text_bytes=4000)
    assert size > 40 * 1024 * 1024
    memory = _memory(ClaudeCodeSessions(str(root)), tmp_path)
    tracemalloc.start()
    try:
        page = memory.transcript(SESSION, from_turn=5001, max_turns=10)
        listed = memory.list_sessions(status="closed")
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert page.first_turn == 5001 and page.last_turn == 5010 and page.next_turn == 5011
    assert "Turns: 12000" in page.text and "question 2500 " in page.text
    assert [s.turns for s in listed] == [12000]
    # the whole file is 40+ MiB; a page and one line are a few hundred KiB
    assert peak < 8 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.0f} MB file"


def test_an_over_long_line_is_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "projects" / PROJECT / f"{SESSION}.jsonl"
    _write_transcript(path, turns=2, text_bytes=100)
    with open(path, "a", encoding="utf-8") as out:
        huge = {"type": "user", "message": {"content": "x" * (MAX_LINE_BYTES + 10)}}
        out.write(json.dumps(huge) + "\n")
    _write_transcript(path.with_name("tail.jsonl"), turns=1, text_bytes=100)
    with open(path, "a", encoding="utf-8") as out:
        out.write(path.with_name("tail.jsonl").read_text(encoding="utf-8"))
    transcript = ClaudeCodeSessions(str(tmp_path / "projects")).read_session(SESSION)
    assert transcript is not None
    assert transcript.skipped_lines == 1 and transcript.total_turns == 6


class CountingSessions:
    """A SessionSource that counts the transcripts it is asked to read (a fake, wired in
    through the composition root)."""

    def __init__(self, transcripts: list[Transcript]) -> None:
        self.inner = InMemorySessions(transcripts)
        self.reads: list[str] = []

    def list_sessions(self) -> list[SessionRef]:
        return self.inner.list_sessions()

    def read_session(self, session_id: str, window: TurnWindow | None = None) -> Transcript | None:
        self.reads.append(session_id)
        return self.inner.read_session(session_id, window)


def _transcript(number: int, compactions: int, size: int) -> Transcript:
    ref = SessionRef(f"s{number}", "p", f"2025-01-0{number}T00:00:00.000Z", size, number * 10)
    turn = Turn(1, "user", ref.modified_at, f"hello {number}")
    return Transcript(ref, (turn,), compactions=compactions, ended_at=ref.modified_at)


def test_list_filters_come_from_a_cache_keyed_by_size_and_mtime(tmp_path: Path) -> None:
    transcripts = [_transcript(n, n % 2, 100 + n) for n in range(1, 6)]
    counting = CountingSessions(transcripts)
    store = InMemoryStore()
    tables = InMemoryChunkIndex(store)
    app = App(
        store,
        store,
        store,
        store,
        InMemoryConfigRepository(),
        FakeContentSource({}),
        FixedClock(LATER),
        projmem=ProjmemAdapters(tables, tables, counting, tables, VaultFolder(str(tmp_path))),
    )
    assert app.sessions is not None
    compacted = app.sessions.list_sessions(status="compacted", limit=200)
    assert sorted(s.ref.session_id for s in compacted) == ["s1", "s3", "s5"]
    assert sorted(counting.reads) == ["s1", "s2", "s3", "s4", "s5"]
    counting.reads.clear()
    again = app.sessions.list_sessions(status="closed", limit=200)
    assert sorted(s.ref.session_id for s in again) == ["s2", "s4"]
    assert counting.reads == []  # nothing changed: nothing re-read
    # one transcript grows (new size): only it is read again, and its new figures count
    grown = replace(_transcript(2, 1, 999), turns=())
    counting.inner = InMemorySessions(
        [t for t in transcripts if t.ref.session_id != "s2"] + [grown]
    )
    compacted = app.sessions.list_sessions(status="compacted", limit=200)
    assert counting.reads == ["s2"]
    assert sorted(s.ref.session_id for s in compacted) == ["s1", "s2", "s3", "s5"]
