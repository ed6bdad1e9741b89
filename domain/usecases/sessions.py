"""Session memory: list agent sessions, read a transcript page by page, store a structured
summary and export it as a note into the session vault, a collection of its own, so past
sessions are found by every search (docs/spec/projmem.md, REQ-PROJMEM-SESSION-*)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from domain.errors import INVALID_ARGUMENT, NOT_FOUND, QmdError
from domain.ports import Clock, NoteWriter, SessionSource, SummaryStore
from domain.sessions import (
    DEFAULT_MAX_TURNS,
    STATUSES,
    SessionRef,
    SessionSummary,
    Transcript,
    TranscriptPage,
    TurnWindow,
    note_name,
    render_transcript,
    session_status,
    summary_note,
    validate_summary,
)
from domain.usecases.collections import CollectionManager

DEFAULT_LIMIT = 10
MAX_LIMIT = 200
VAULT_COLLECTION = "sessions"
NO_TURNS: TurnWindow = (1, 0)  # read for the figures only: no turn keeps its text


@dataclass(frozen=True)
class SessionListing:
    ref: SessionRef
    status: str
    has_summary: bool
    turns: int
    skipped_lines: int
    project: str = ""  # the folder the session worked in (Transcript.project)


@dataclass(frozen=True)
class SavedSummary:
    summary: SessionSummary
    note_path: str  # collection/path of the exported note
    collection: str


@dataclass(frozen=True)
class SessionStores:
    """Where session memory reads and writes: the transcripts, the summaries' rows and the
    vault its notes go to; `refusal`: why sessions may not be served here (a vault outside
    --force-root: the projmem surface refuses to start with it), None where they may."""

    sessions: SessionSource
    summaries: SummaryStore
    notes: NoteWriter
    refusal: QmdError | None = None


class SessionMemory:
    def __init__(self, stores: SessionStores, collections: CollectionManager, clock: Clock) -> None:
        self._sessions = stores.sessions
        self._summaries = stores.summaries
        self._notes = stores.notes
        self._collections = collections
        self._clock = clock
        self.refusal = stores.refusal
        # a transcript's figures (turns, compactions, last write) by session id, valid while
        # its file keeps the same size and mtime: listing with a filter re-reads only what
        # changed (REQ-PROJMEM-SESSION-005)
        self._figures: dict[str, tuple[tuple[int, int], Transcript]] = {}

    @property
    def vault_folder(self) -> str:
        return self._notes.folder

    def list_sessions(
        self, status: str | None = None, has_summary: bool | None = None, limit: int = 10
    ) -> list[SessionListing]:
        if status is not None and status not in STATUSES:
            raise QmdError(INVALID_ARGUMENT, f"status must be one of {', '.join(STATUSES)}")
        if not 1 <= limit <= MAX_LIMIT:
            raise QmdError(INVALID_ARGUMENT, f"limit must be between 1 and {MAX_LIMIT}")
        summarized = self._summaries.summarized_ids()
        now = self._clock.now_iso()
        listed: list[SessionListing] = []
        refs = self._sessions.list_sessions()
        for ref in refs:
            summary = ref.session_id in summarized
            if has_summary is not None and summary != has_summary:
                continue
            transcript = self._figures_of(ref)
            if transcript is None:
                continue
            state = session_status(transcript, now)
            if status is not None and state != status:
                continue
            listed.append(
                SessionListing(
                    ref,
                    state,
                    summary,
                    transcript.total_turns,
                    transcript.skipped_lines,
                    transcript.project,
                )
            )
            if len(listed) >= limit:
                break
        present = {ref.session_id for ref in refs}
        for gone in [key for key in self._figures if key not in present]:
            del self._figures[gone]
        return listed

    def _figures_of(self, ref: SessionRef) -> Transcript | None:
        """The session's figures, from the cache while its file is unchanged."""
        key = (ref.size, ref.mtime_ns)
        cached = self._figures.get(ref.session_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        transcript = self._sessions.read_session(ref.session_id, NO_TURNS)
        if transcript is not None and ref.size >= 0 and ref.mtime_ns > 0:
            self._figures[ref.session_id] = (key, transcript)
        return transcript

    def _transcript(self, session_id: str | None, window: TurnWindow = NO_TURNS) -> Transcript:
        if session_id is None:
            refs = self._sessions.list_sessions()
            if not refs:
                raise QmdError(NOT_FOUND, "No sessions found")
            session_id = refs[0].session_id
        transcript = self._sessions.read_session(session_id, window)
        if transcript is None:
            raise QmdError(NOT_FOUND, f"Session not found: {session_id}")
        return transcript

    def transcript(
        self,
        session_id: str | None = None,
        from_turn: int = 1,
        max_turns: int = DEFAULT_MAX_TURNS,
    ) -> TranscriptPage:
        # only the page's turns are kept in memory (the checks come first: a bad window
        # is refused without reading anything)
        render_transcript(_EMPTY, from_turn, max_turns)
        transcript = self._transcript(session_id, (from_turn, max_turns))
        return render_transcript(transcript, from_turn, max_turns)

    def summary(self, session_id: str) -> str | None:
        return self._summaries.get_summary(session_id)

    def summarize(self, session_id: str, args: dict[str, Any]) -> SavedSummary:
        if not session_id.strip():
            raise QmdError(INVALID_ARGUMENT, "sessionId must not be empty")
        transcript = self._transcript(session_id)  # the session must exist
        summary = validate_summary(session_id, args)
        if self.refusal is not None:  # nothing is written where it may not be
            raise self.refusal
        self._summaries.put_summary(session_id, summary.to_json(), self._clock.now_iso())
        name = self._notes.write_note(note_name(session_id), summary_note(summary, transcript))
        collection = self._vault_collection()
        return SavedSummary(summary, f"{collection}/{name}", collection)

    def _vault_collection(self) -> str:
        """Index the vault folder: the collection already naming it, or a new one."""
        folder = posixpath.normpath(self._notes.folder)
        for collection in self._collections.list():
            if posixpath.normpath(collection.path) == folder:
                self._collections.index(collection)
                return collection.name
        name = VAULT_COLLECTION
        number = 2
        while self._collections.name_taken(name):
            name, number = f"{VAULT_COLLECTION}-{number}", number + 1
        self._collections.add(folder, name)
        return name


_EMPTY = Transcript(SessionRef("", "", ""), ())
