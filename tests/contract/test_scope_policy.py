"""The scope policy's own parts (REQ-SEC-SCOPE-001..004): root, trust and allow-list in one
object; the memory rows seen from one folder, over every registered backend; transcripts
admitted by real path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.fs.claude_sessions import ClaudeCodeSessions
from adapters.fs.memory import MarkdownMemoryStore
from adapters.fs.scope import FolderScopedMemoryRows, ScopePolicy
from domain.errors import OUT_OF_ROOT, QmdError
from domain.memory import QA, MemoryRecord, Topic
from tests.backend_locations import BACKENDS, opened_backend


def test_policy_combines_root_and_trust(tmp_path: Path) -> None:
    from domain.model import Collection

    root = tmp_path / "root"
    (root / "in").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    everything = ScopePolicy()
    rooted = ScopePolicy(str(root), withheld=["gated"])
    inside, outside = Collection("in", str(root / "in")), Collection("out", str(tmp_path / "out"))
    gated = Collection("gated", str(root / "in"))
    assert everything.allows(inside) and everything.allows(outside)
    assert ScopePolicy(withheld=["gated"]).allows(outside)
    assert not ScopePolicy(withheld=["gated"]).allows(gated)
    assert rooted.allows(inside) and not rooted.allows(outside) and not rooted.allows(gated)
    assert not rooted.allows(Collection("empty", ""))
    everything.require_inside("QMD_MEMORY_DIR", str(tmp_path / "out"))  # no root: any folder
    rooted.require_inside("QMD_MEMORY_DIR", str(root / "memory"))  # not there yet: fine
    with pytest.raises(QmdError) as caught:
        rooted.require_inside("QMD_SESSIONS_VAULT", str(tmp_path / "out" / "vault"))
    assert caught.value.code == OUT_OF_ROOT and "QMD_SESSIONS_VAULT" in caught.value.message
    (root / "link").symlink_to(tmp_path / "out")
    with pytest.raises(QmdError):
        rooted.require_inside("QMD_MEMORY_DIR", str(root / "link" / "memory"))


@pytest.fixture(params=[*BACKENDS])
def rows(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    with opened_backend(request.param, tmp_path) as backend:
        yield backend.memory()


def _record(n: int, topic: str) -> MemoryRecord:
    stamp = "2026-01-01T00:00:00Z"
    return MemoryRecord(f"qa-{n}", QA, topic, f"q{n}?", f"a{n}", stamp, stamp, vector=(1.0, 0.0))


def test_memory_rows_are_seen_from_one_folder(rows: Any, tmp_path: Path) -> None:
    elsewhere = MarkdownMemoryStore(str(tmp_path / "outside"), rows)
    elsewhere.put([_record(1, "secret topic")])
    elsewhere.add_topic(Topic("secret topic", (1.0, 0.0)))
    here = MarkdownMemoryStore(
        str(tmp_path / "inside"), FolderScopedMemoryRows(rows, str(tmp_path / "inside"))
    )
    assert here.get("qa-1") is None and here.records() == [] and here.topics() == []
    here.put([_record(2, "home")])
    here.add_topic(Topic("home", (0.0, 1.0)))
    assert [r.id for r in here.records()] == ["qa-2"] and [t.name for t in here.topics()] == [
        "home"
    ]
    assert [r.id for r in here.load()] == ["qa-2"]
    # the other folder's rows were not forgotten by this folder's load (repair)
    assert {json.loads(raw)["id"] for raw, _ in rows.memory_records(None, None)} == {
        "qa-1",
        "qa-2",
    }
    assert elsewhere.get("qa-1") is not None


def test_transcripts_are_admitted_by_real_path(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    line = json.dumps({"type": "user", "message": {"content": "hello"}}) + "\n"
    (outside / "p").mkdir(parents=True)
    (outside / "p" / "away.jsonl").write_text(line, encoding="utf-8")
    (root / "p").mkdir(parents=True)
    (root / "p" / "here.jsonl").write_text(line, encoding="utf-8")
    (root / "p" / "linked.jsonl").symlink_to(outside / "p" / "away.jsonl")
    policy = ScopePolicy(str(root))
    sessions = ClaudeCodeSessions(str(root), admit=policy.contains_path)
    assert [r.session_id for r in sessions.list_sessions()] == ["here"]
    assert sessions.read_session("linked") is None
    assert ClaudeCodeSessions(str(outside), admit=policy.contains_path).list_sessions() == []
    assert [r.session_id for r in ClaudeCodeSessions(str(root)).list_sessions()] == [
        "here",
        "linked",
    ]


def test_a_rooted_app_adds_and_indexes_only_inside_folders(tmp_path: Path) -> None:
    """`collection add` and indexing under --force-root ask the same policy."""
    from adapters.bootstrap import build_app
    from tests.mcp_harness import fixture_env

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "notes").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nzebra\n", encoding="utf-8")
    (root / "notes" / "a.md").write_text("# A\n\nkettle\n", encoding="utf-8")
    env = fixture_env(tmp_path)
    app = build_app(env=env, with_models=False, force_root=str(root))
    try:
        with pytest.raises(QmdError) as caught:
            app.collections.add(str(outside), "out")
        assert caught.value.code == OUT_OF_ROOT
        _added, counts = app.collections.add(str(root / "notes"), "notes")
        assert counts.indexed == 1
    finally:
        app.close()
    config = Path(env["QMD_CONFIG_DIR"]) / "index.yml"
    assert "notes" in config.read_text(encoding="utf-8")
    assert str(outside) not in config.read_text(encoding="utf-8")
