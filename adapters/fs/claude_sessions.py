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
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from domain.sessions import SessionRef, Transcript, Turn

DEFAULT_SESSIONS_DIR = os.path.join("~", ".claude", "projects")
MODIFYING_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
MAX_TRANSCRIPT_BYTES = 256 * 1024 * 1024  # a larger file is read up to here


def _iso(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass
class _TurnBuilder:
    role: str
    timestamp: str
    texts: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)


class ClaudeCodeSessions:
    def __init__(self, root: str) -> None:
        self._root = os.path.expanduser(root)

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
                    if os.path.isfile(path):
                        yield name[: -len(".jsonl")], project, path

    def list_sessions(self) -> list[SessionRef]:
        refs: list[tuple[float, SessionRef]] = []
        for session_id, project, path in self._files():
            try:
                mtime = os.stat(path).st_mtime
            except OSError:
                continue
            refs.append((mtime, SessionRef(session_id, project, _iso(mtime))))
        refs.sort(key=lambda item: (-item[0], item[1].session_id))
        return [ref for _, ref in refs]

    def read_session(self, session_id: str) -> Transcript | None:
        for found_id, project, path in self._files():
            if found_id == session_id:
                try:
                    mtime = os.stat(path).st_mtime
                    with open(path, "rb") as handle:
                        data = handle.read(MAX_TRANSCRIPT_BYTES)
                except OSError:
                    return None
                return parse_transcript(data, SessionRef(session_id, project, _iso(mtime)))
        return None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def parse_transcript(data: bytes, ref: SessionRef) -> Transcript:
    """Turns, compactions, timestamps and files from the raw JSONL bytes of one session."""
    turns: list[_TurnBuilder] = []
    skipped = compactions = 0
    cwd: str | None = None
    stamps: list[str] = []
    modified: list[str] = []
    for raw in data.split(b"\n"):
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
        if isinstance(stamp, str) and kind in ("user", "assistant", "system"):
            stamps.append(stamp)
        if isinstance(record.get("cwd"), str):
            cwd = record["cwd"]
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
                turns.append(_TurnBuilder("user", when, texts))
            continue
        if not turns or turns[-1].role != "assistant":
            turns.append(_TurnBuilder("assistant", when))
        current = turns[-1]
        for block in blocks:
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                current.texts.append(str(block["text"]))
            elif block.get("type") == "tool_use" and isinstance(block.get("name"), str):
                name = block["name"]
                if name not in current.tools:
                    current.tools.append(name)
                target = _file_of(block.get("input"))
                if name in MODIFYING_TOOLS and target:
                    if target not in current.modified:
                        current.modified.append(target)
                    if target not in modified:
                        modified.append(target)
    ordered = sorted(s for s in stamps if s)
    return Transcript(
        ref=ref,
        turns=tuple(
            Turn(
                number=number,
                role=t.role,
                timestamp=t.timestamp,
                text="\n\n".join(t.texts),
                tools=tuple(t.tools),
                files_modified=tuple(t.modified),
            )
            for number, t in enumerate(turns, start=1)
        ),
        compactions=compactions,
        skipped_lines=skipped,
        cwd=cwd,
        started_at=ordered[0] if ordered else None,
        ended_at=ordered[-1] if ordered else None,
        files_modified=tuple(modified),
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
