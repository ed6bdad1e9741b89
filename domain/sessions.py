"""Agent sessions: transcripts read from a `SessionSource`, their status, the transcript text
the projmem surface shows, and the structured summaries agents store
(docs/spec/projmem.md, REQ-PROJMEM-SESSION-*)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from domain.errors import INVALID_ARGUMENT, QmdError

ACTIVE_WINDOW_SECONDS = 30 * 60  # written to within this long ago: the session is active
STATUSES = ("active", "compacted", "closed")
DEFAULT_MAX_TURNS = 50
MAX_TURNS = 500
TURN_TEXT_CHARS = 4000  # a longer turn is cut (the transcript file keeps it whole)
TRANSCRIPT_CHARS = 60_000  # one page of transcript text at most


# (first turn number, how many turns) whose text a reader keeps; the rest are only counted
TurnWindow = tuple[int, int]


@dataclass(frozen=True)
class SessionRef:
    session_id: str
    project: str
    modified_at: str  # ISO 8601 UTC, the transcript file's last write
    # the file's size and last write in nanoseconds: what a cache of its figures is keyed by
    # (-1 / 0: unknown, never cached)
    size: int = -1
    mtime_ns: int = 0


@dataclass(frozen=True)
class Turn:
    number: int
    role: str  # "user" or "assistant"
    timestamp: str
    text: str
    tools: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    chars: int = -1  # the whole text's length when `text` holds only its start (-1: all of it)


@dataclass(frozen=True)
class Transcript:
    ref: SessionRef
    turns: tuple[Turn, ...]
    compactions: int = 0
    skipped_lines: int = 0  # lines that were not valid JSON records
    cwd: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    files_modified: tuple[str, ...] = field(default=())
    # how many turns the session has; `turns` may hold only a window of them (-1: all)
    turn_count: int = -1

    @property
    def total_turns(self) -> int:
        return self.turn_count if self.turn_count >= 0 else len(self.turns)

    @property
    def project(self) -> str:
        """The folder the session worked in: the transcript's `cwd`; without one, the name of
        the folder Claude Code filed it under (`-home-user-proj`, which cannot be decoded
        back: a `-` there may have been `/`, `.` or `-`)."""
        return self.cwd or self.ref.project


def parse_iso(value: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def session_status(transcript: Transcript, now_iso: str) -> str:
    """active: written to within the last 30 minutes; else compacted: the agent compacted its
    context at least once; else closed."""
    now = parse_iso(now_iso)
    last = parse_iso(transcript.ended_at or transcript.ref.modified_at)
    if (
        now is not None
        and last is not None
        and (now - last).total_seconds() <= ACTIVE_WINDOW_SECONDS
    ):
        return "active"
    return "compacted" if transcript.compactions else "closed"


def duration_text(transcript: Transcript) -> str:
    start = parse_iso(transcript.started_at or "")
    end = parse_iso(transcript.ended_at or "")
    if start is None or end is None:
        return "unknown"
    seconds = max(0, int((end - start).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    return f"{minutes}m {secs:02d}s"


@dataclass(frozen=True)
class TranscriptPage:
    text: str
    first_turn: int
    last_turn: int  # 0 when the page holds no turn
    next_turn: int | None  # where the next page starts, None at the end


def render_transcript(
    transcript: Transcript, from_turn: int = 1, max_turns: int = DEFAULT_MAX_TURNS
) -> TranscriptPage:
    """The seed's `--- Turn N [role] timestamp ---` text for one page of turns, with a header
    (duration, files modified, turn range, skipped lines) and a pointer to the next page."""
    if from_turn < 1:
        raise QmdError(INVALID_ARGUMENT, "fromTurn must be at least 1")
    if not 1 <= max_turns <= MAX_TURNS:
        raise QmdError(INVALID_ARGUMENT, f"maxTurns must be between 1 and {MAX_TURNS}")
    total = transcript.total_turns
    page = [t for t in transcript.turns if from_turn <= t.number < from_turn + max_turns]
    body: list[str] = []
    used = 0
    last = 0
    for turn in page:
        block = _turn_block(turn)
        if body and used + len(block) > TRANSCRIPT_CHARS:
            break
        body.append(block)
        used += len(block)
        last = turn.number
    next_turn = last + 1 if last and last < total else None
    ref = transcript.ref
    header = [
        f"Session: {ref.session_id}",
        f"Project: {transcript.project}",
        f"Duration: {duration_text(transcript)}"
        + (f" ({transcript.started_at} to {transcript.ended_at})" if transcript.started_at else ""),
        "Files modified: " + (", ".join(transcript.files_modified) or "(none)"),
        f"Turns: {total}"
        + (f" (showing {from_turn}-{last})" if last else f" (none from {from_turn})"),
    ]
    if transcript.skipped_lines:
        header.append(f"Skipped lines: {transcript.skipped_lines} (not valid JSON records)")
    if next_turn is not None:
        header.append(f"More: call again with fromTurn={next_turn}")
    text = "\n".join(header) + "\n\n" + "\n".join(body)
    return TranscriptPage(text.rstrip("\n") + "\n", from_turn, last, next_turn)


def _turn_block(turn: Turn) -> str:
    lines = [f"--- Turn {turn.number} [{turn.role}] {turn.timestamp} ---"]
    if turn.tools:
        lines.append("Tools: " + ", ".join(turn.tools))
    text = turn.text
    whole = max(turn.chars, len(text))
    if whole > TURN_TEXT_CHARS:
        text = text[:TURN_TEXT_CHARS] + f"\n[... {whole - TURN_TEXT_CHARS} more chars]"
    lines.append(text)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- summaries

SUMMARY_LISTS = ("decisions", "outcomes", "openItems", "tags")
OVERVIEW_CHARS = 4000
ITEM_CHARS = 1000
MAX_ITEMS = 100
_TAG = re.compile(r"^[^\s,\[\]#][^,\[\]]{0,63}$")


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    overview: str
    decisions: tuple[str, ...]
    outcomes: tuple[str, ...]
    open_items: tuple[str, ...]
    tags: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "sessionId": self.session_id,
                "overview": self.overview,
                "decisions": list(self.decisions),
                "outcomes": list(self.outcomes),
                "openItems": list(self.open_items),
                "tags": list(self.tags),
            },
            ensure_ascii=False,
        )


def validate_summary(session_id: str, args: Mapping[str, Any]) -> SessionSummary:
    """A summary from tool/CLI arguments, or `invalid-argument` naming every problem."""
    problems: list[str] = []
    overview = args.get("overview")
    if not isinstance(overview, str) or not overview.strip():
        problems.append("overview must be a non-empty string")
    elif len(overview) > OVERVIEW_CHARS:
        problems.append(f"overview must be at most {OVERVIEW_CHARS} characters")
    lists: dict[str, tuple[str, ...]] = {}
    for key in SUMMARY_LISTS:
        value = args.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            problems.append(f"{key} must be an array of strings")
            continue
        items = tuple(v.strip() for v in value)
        if any(not v for v in items):
            problems.append(f"{key} must not contain empty strings")
        if len(items) > MAX_ITEMS:
            problems.append(f"{key} must have at most {MAX_ITEMS} items")
        if any(len(v) > ITEM_CHARS for v in items):
            problems.append(f"{key} items must be at most {ITEM_CHARS} characters")
        lists[key] = items
    for tag in lists.get("tags", ()):
        if tag and not _TAG.match(tag):
            problems.append(f"tag {tag!r} must be a short word or phrase (no commas or brackets)")
    if problems:
        raise QmdError(INVALID_ARGUMENT, "Invalid session summary: " + "; ".join(problems))
    assert isinstance(overview, str)
    return SessionSummary(
        session_id=session_id,
        overview=overview.strip(),
        decisions=lists["decisions"],
        outcomes=lists["outcomes"],
        open_items=lists["openItems"],
        tags=lists["tags"],
    )


def note_name(session_id: str) -> str:
    """The vault file name of a session's note (ids are file names already; keep it safe)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", session_id) + ".md"


def summary_note(summary: SessionSummary, transcript: Transcript) -> str:
    """The markdown note a summary is exported as (searchable once its folder is indexed)."""
    ref = transcript.ref

    def section(title: str, items: Sequence[str]) -> list[str]:
        return [f"## {title}", "", *(f"- {item}" for item in items or ("(none)",)), ""]

    date = (transcript.started_at or ref.modified_at)[:10]
    lines = [
        "---",
        f"session_id: {json.dumps(ref.session_id)}",
        f"project: {json.dumps(transcript.project)}",
        f"date: {date}",
        "tags: [" + ", ".join(summary.tags) + "]",
        "---",
        "",
        f"# Session {date} {ref.session_id[:8]}",
        "",
        "## Overview",
        "",
        summary.overview,
        "",
        *section("Decisions", summary.decisions),
        *section("Outcomes", summary.outcomes),
        *section("Open items", summary.open_items),
        "## Session",
        "",
        f"- Duration: {duration_text(transcript)}",
        f"- Turns: {transcript.total_turns}",
        "- Files modified: " + (", ".join(transcript.files_modified) or "(none)"),
        "",
    ]
    return "\n".join(lines)
