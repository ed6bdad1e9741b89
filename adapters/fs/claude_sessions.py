"""Claude Code session transcripts as a `SessionSource` (read-only).

Claude Code appends one JSON record per line to `~/.claude/projects/<project>/<session>.jsonl`
(`<project>` is the working folder with every non-alphanumeric character turned into `-`).
Records carry `type`: `user` and `assistant` (with `message.role` and `message.content`, a
string or a list of blocks: `text`, `thinking`, `tool_use` with `name` and `input`,
`tool_result`), `summary` (`summary`, `leafUuid`), `system` (subtype `compact_boundary` marks a
compaction), `file-history-snapshot` and others; most have `uuid`, `parentUuid`, `sessionId`,
`timestamp`, `cwd`, `isSidechain`. Sidechain files (`agent-*.jsonl`) belong to sub-agents and
are not sessions of their own.

Turns: a user message with text starts a user turn; everything the assistant does until the
next such message (its text, tool calls and the tool results fed back to it) is one assistant
turn. A line that is not a JSON object is skipped and counted, never fatal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:  # the session types load with the first transcript read
    from domain.sessions import SessionRef, Transcript, Turn, TurnWindow

DEFAULT_SESSIONS_DIR = os.path.join("~", ".claude", "projects")
MODIFYING_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
# One JSONL line is parsed whole; a longer one is skipped and counted, so reading a
# transcript holds at most this much of it at once whatever the file size (REQ-PROJMEM-SESSION-005).
MAX_LINE_BYTES = 8 * 1024 * 1024
_SKIP_CHUNK = 1024 * 1024
_TOO_LONG = b"\xff"  # stands for a skipped over-long line: not JSON, so counted as skipped


def _iso(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass
class _TurnBuilder:
    """One turn as its lines are read: what is kept of it, and its full length."""

    role: str
    timestamp: str
    number: int
    keep: bool  # inside the window asked for: its text, tools and files are kept
    texts: list[str] = field(default_factory=list)
    chars: int = 0  # the whole text's length, kept or not
    tools: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)

    def add_text(self, text: str) -> None:
        from domain.sessions import TURN_TEXT_CHARS

        joined = len(text) + (2 if self.chars else 0)
        if self.keep and self.chars < TURN_TEXT_CHARS:
            self.texts.append(text[: TURN_TEXT_CHARS - self.chars + 2])
        self.chars += joined

    def turn(self) -> Turn:
        from domain.sessions import TURN_TEXT_CHARS, Turn

        text = "\n\n".join(self.texts)
        return Turn(
            number=self.number,
            role=self.role,
            timestamp=self.timestamp,
            text=text[:TURN_TEXT_CHARS] if self.chars > TURN_TEXT_CHARS else text,
            tools=tuple(self.tools),
            files_modified=tuple(self.modified),
            chars=self.chars,
        )


class ClaudeCodeSessions:
    """`admit(path)`: whether a transcript file may be read at all (the scope policy: under
    `--force-root`, one whose real path lies outside the root is absent)."""

    def __init__(self, root: str, admit: Callable[[str], bool] | None = None) -> None:
        self._root = os.path.expanduser(root)
        self._admit = admit or (lambda _path: True)

    @property
    def root(self) -> str:
        return self._root

    def _files(self) -> Iterator[tuple[str, str, str]]:
        """(session id, project folder name, file path) of every main session file."""
        try:
            projects = sorted(os.listdir(self._root))
        except OSError:
            return
        for project in projects:
            folder = os.path.join(self._root, project)
            if not os.path.isdir(folder):
                continue
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names:
                if name.endswith(".jsonl") and not name.startswith("agent-"):
                    path = os.path.join(folder, name)
                    if os.path.isfile(path) and self._admit(os.path.abspath(path)):
                        yield name[: -len(".jsonl")], project, path

    @staticmethod
    def _ref(session_id: str, project: str, path: str) -> tuple[float, SessionRef]:
        from domain.sessions import SessionRef

        info = os.stat(path)
        ref = SessionRef(
            session_id, project, _iso(info.st_mtime), size=info.st_size, mtime_ns=info.st_mtime_ns
        )
        return info.st_mtime, ref

    def list_sessions(self) -> list[SessionRef]:
        refs: list[tuple[float, SessionRef]] = []
        for session_id, project, path in self._files():
            try:
                refs.append(self._ref(session_id, project, path))
            except OSError:
                continue
        refs.sort(key=lambda item: (-item[0], item[1].session_id))
        return [ref for _, ref in refs]

    def read_session(self, session_id: str, window: TurnWindow | None = None) -> Transcript | None:
        for found_id, project, path in self._files():
            if found_id == session_id:
                try:
                    _mtime, ref = self._ref(session_id, project, path)
                    with open(path, "rb") as handle:
                        return parse_lines(_bounded_lines(handle), ref, window)
                except OSError:
                    return None
        return None


def _bounded_lines(handle: BinaryIO) -> Iterator[bytes]:
    """The file's lines, read one at a time; a line longer than MAX_LINE_BYTES is passed
    over in chunks and stands as one unparseable line."""
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while True:
                rest = handle.readline(_SKIP_CHUNK)
                if not rest or rest.endswith(b"\n"):
                    break
            yield _TOO_LONG
            continue
        yield line


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def parse_transcript(data: bytes, ref: SessionRef, window: TurnWindow | None = None) -> Transcript:
    """Turns, compactions, timestamps and files from the raw JSONL bytes of one session."""
    return parse_lines(data.split(b"\n"), ref, window)


def parse_lines(
    lines: Iterable[bytes], ref: SessionRef, window: TurnWindow | None = None
) -> Transcript:
    """The transcript from its JSONL lines, streamed: only the turns in `window` (first turn
    number, how many; None: every turn) keep their text, so memory stays bounded by one line
    and one page whatever the file size."""
    from domain.sessions import Transcript

    first, count = window if window is not None else (1, None)
    kept: list[Turn] = []
    current: _TurnBuilder | None = None
    number = skipped = compactions = 0
    cwd: str | None = None
    earliest: str | None = None
    latest: str | None = None
    modified: dict[str, None] = {}

    def start(role: str, when: str) -> _TurnBuilder:
        nonlocal current, number
        if current is not None and current.keep:
            kept.append(current.turn())
        number += 1
        keep = number >= first and (count is None or number < first + count)
        current = _TurnBuilder(role, when, number, keep)
        return current

    for raw in lines:
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            skipped += 1
            continue
        if not isinstance(record, dict):
            skipped += 1
            continue
        kind = record.get("type")
        stamp = record.get("timestamp")
        if isinstance(stamp, str) and stamp and kind in ("user", "assistant", "system"):
            earliest = stamp if earliest is None or stamp < earliest else earliest
            latest = stamp if latest is None or stamp > latest else latest
        if cwd is None and isinstance(record.get("cwd"), str) and record["cwd"]:
            cwd = record["cwd"]  # where the session started: the project it is filed under
        if kind == "system" and record.get("subtype") == "compact_boundary":
            compactions += 1
            continue
        if kind not in ("user", "assistant") or record.get("isSidechain") is True:
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            skipped += 1
            continue
        if record.get("isCompactSummary") is True:
            continue  # the summary Claude Code feeds itself after a compaction
        blocks = _blocks(message.get("content"))
        when = stamp if isinstance(stamp, str) else ""
        if kind == "user":
            texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
            texts = [t for t in texts if t.strip()]
            if texts and not record.get("isMeta"):
                turn = start("user", when)
                for text in texts:
                    turn.add_text(text)
            continue
        if current is None or current.role != "assistant":
            start("assistant", when)
        assert current is not None
        for block in blocks:
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                current.add_text(str(block["text"]))
            elif block.get("type") == "tool_use" and isinstance(block.get("name"), str):
                name = block["name"]
                if current.keep and name not in current.tools:
                    current.tools.append(name)
                target = _file_of(block.get("input"))
                if name in MODIFYING_TOOLS and target:
                    if current.keep and target not in current.modified:
                        current.modified.append(target)
                    modified.setdefault(target)
    if current is not None and current.keep:
        kept.append(current.turn())
    return Transcript(
        ref=ref,
        turns=tuple(kept),
        compactions=compactions,
        skipped_lines=skipped,
        cwd=cwd,
        started_at=earliest,
        ended_at=latest,
        files_modified=tuple(modified),
        turn_count=number,
    )


def _file_of(tool_input: Any) -> str | None:
    if not isinstance(tool_input, dict):
        return None
    for key in ("file_path", "notebook_path", "path"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return None


class VaultFolder:
    """The folder session notes are written to (a collection, so they are searchable)."""

    def __init__(self, folder: str) -> None:
        self._folder = os.path.abspath(os.path.expanduser(folder))

    @property
    def folder(self) -> str:
        return self._folder

    def write_note(self, name: str, text: str) -> str:
        os.makedirs(self._folder, exist_ok=True)
        target = os.path.join(self._folder, name)
        partial = target + ".partial"
        with open(partial, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(partial, target)
        return name


if TYPE_CHECKING:  # structural conformance, checked by mypy
    from domain.ports import NoteWriter, SessionSource

    def _conforms(sessions: ClaudeCodeSessions, vault: VaultFolder) -> None:
        _s: SessionSource = sessions
        _v: NoteWriter = vault
