"""Fixtures for the projmem surface: a corpus with deep heading trees and Claude Code session
transcripts in the real JSONL format (tests/data/projmem/), plus a long session built here."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "projmem"
CORPUS = DATA / "corpus"
SESSIONS = DATA / "sessions"
PROJECT = "-home-dev-projmem"
CWD = "/home/dev/projmem"
LONG_SESSION = "7d0c2a5e-long-0000-4000-8000-000000000300"
LONG_TURN_PAIRS = 150


def _base(session: str, uuid: str, parent: str | None, stamp: str) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": session,
        "version": "2.0.55",
        "gitBranch": "main",
        "uuid": uuid,
        "timestamp": stamp,
    }


def user(session: str, uuid: str, parent: str | None, stamp: str, text: str) -> dict[str, Any]:
    record = _base(session, uuid, parent, stamp)
    record.update(type="user", message={"role": "user", "content": text})
    return record


def assistant(
    session: str,
    uuid: str,
    parent: str | None,
    stamp: str,
    blocks: list[dict[str, Any]],
) -> dict[str, Any]:
    record = _base(session, uuid, parent, stamp)
    record.update(
        type="assistant",
        requestId=f"req_{uuid[:8]}",
        message={
            "id": f"msg_{uuid[:8]}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": blocks,
            "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in blocks) else None,
            "usage": {"input_tokens": 12, "output_tokens": 34},
        },
    )
    return record


def tool_result(
    session: str, uuid: str, parent: str, stamp: str, tool_id: str, output: str
) -> dict[str, Any]:
    record = _base(session, uuid, parent, stamp)
    record.update(
        type="user",
        message={
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}],
        },
        toolUseResult={"stdout": output, "stderr": "", "interrupted": False},
    )
    return record


def long_session_lines() -> list[str]:
    """150 user/assistant exchanges with a tool call each: a transcript that needs paging."""
    lines: list[str] = []
    parent: str | None = None
    for n in range(LONG_TURN_PAIRS):
        minute, second = divmod(n * 20, 60)
        stamp = f"2026-02-18T09:{minute:02d}:{second:02d}.000Z"
        later = f"2026-02-18T09:{minute:02d}:{second + 5:02d}.000Z"
        u, a, r = f"u{n:04d}-0000", f"a{n:04d}-0000", f"r{n:04d}-0000"
        lines.append(json.dumps(user(LONG_SESSION, u, parent, stamp, f"Step {n}: check file {n}")))
        tool = {
            "type": "tool_use",
            "id": f"toolu_{n:04d}",
            "name": "Edit" if n % 3 == 0 else "Read",
            "input": {"file_path": f"{CWD}/src/module_{n % 5}.py"},
        }
        lines.append(
            json.dumps(
                assistant(LONG_SESSION, a, u, later, [{"type": "text", "text": f"Done {n}."}, tool])
            )
        )
        lines.append(json.dumps(tool_result(LONG_SESSION, r, a, later, f"toolu_{n:04d}", "ok")))
        parent = r
    return lines


def install_sessions(root: Path, mtimes: dict[str, float] | None = None) -> Path:
    """Copy the fixture transcripts under `root/<project>/` and add the long session.

    Returns the sessions root (what QMD_SESSIONS_DIR names). `mtimes` sets file times
    (epoch seconds) by session id, so tests decide which session is the latest."""
    shutil.copytree(SESSIONS, root, dirs_exist_ok=True)
    long_file = root / PROJECT / f"{LONG_SESSION}.jsonl"
    long_file.write_text("\n".join(long_session_lines()) + "\n", encoding="utf-8")
    for session_id, when in (mtimes or {}).items():
        os.utime(root / PROJECT / f"{session_id}.jsonl", (when, when))
    return root
