"""The projmem surface end to end: a real `qmd mcp --surface projmem` over stdio, all nine
tools, over the deep-heading fixture corpus and Claude Code transcripts in the real format
(REQ-PROJMEM-*; docs/spec/projmem.md)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from adapters.version import package_version
from domain.usecases.projmem import PIPELINE
from tests.guarantees import tool_names
from tests.mcp_harness import StdioServer, fixture_env
from tests.projmem_fixtures import CORPUS, LONG_SESSION, PROJECT, install_sessions

# the search tools, in the order the instructions walk an agent through them
SEARCHES = ["projmem_search", "projmem_vector_search", "projmem_deep_search"]
AUTH = "2b9f1c7e-auth-4a1d-9c3e-000000000001"
COMPACTED = "5c3e8d21-comp-4b7a-8f10-000000000002"
BROKEN = "9e4f6a10-bad0-4c2d-8e5f-000000000003"


def projmem_env(root: Path) -> dict[str, str]:
    """An index of the projmem corpus (collection `notes`) and the fixture sessions."""
    import shutil

    from adapters.bootstrap import build_app

    env = fixture_env(root)
    corpus = root / "corpus"
    shutil.copytree(CORPUS, corpus)
    old = time.time() - 86_400
    sessions = install_sessions(
        root / "claude",
        {BROKEN: old - 300, COMPACTED: old - 200, LONG_SESSION: old - 100, AUTH: old},
    )
    env["QMD_SESSIONS_DIR"] = str(sessions)
    env["QMD_SESSIONS_VAULT"] = str(root / "vault")
    app = build_app(env=env, with_models=False)
    try:
        app.collections.add(str(corpus), "notes")
    finally:
        app.close()
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("projmem")
    env = projmem_env(root)
    proc = StdioServer(env, "--surface", "projmem")
    proc.env = env
    hello = proc.initialize()
    proc.hello = hello
    proc.root = root
    yield proc
    proc.kill()


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


def test_handshake_names_the_nine_tools_and_the_workflow(server: Any) -> None:
    result = server.hello["result"]
    assert result["serverInfo"]["version"] == package_version()  # REQ-SPEC-VERSION-001
    instructions = result["instructions"]
    order = [instructions.index(f"`{name}`") for name in SEARCHES]
    assert order == sorted(order)  # search, then vector search, then deep search
    assert "`projmem_get` / `projmem_multi_get`" in instructions
    tools = server.request("tools/list", {})["result"]["tools"]
    assert [t["name"] for t in tools] == tool_names("projmem")


def test_search_names_the_matching_section(server: Any) -> None:
    result = server.call("projmem_search", {"query": "grace period concurrent refreshes"})
    body = text(result)
    first = body.splitlines()[0]
    assert re.fullmatch(
        r'#\d+ \| notes/code-notes/auth\.md \| "Auth > Tokens > Refresh > Rotation window" '
        r"\| score: \d\.\d\d",
        first,
    ), first
    assert "Mode: bm25_only" in body and re.search(r"Time: \d+\.\d ms", body)
    assert "Results: " in body
    structured = result["structuredContent"]
    assert structured["mode"] == "bm25_only" and structured["count"] == len(structured["results"])
    hit = structured["results"][0]
    assert hit["headingPath"] == "Auth > Tokens > Refresh > Rotation window"
    assert "thirty seconds" in hit["snippet"]


def test_get_by_chunk_id_returns_the_exact_lines(server: Any) -> None:
    found = server.call("projmem_search", {"query": "Redis sliding expiry"})
    chunk_id = found["structuredContent"]["results"][0]["chunkId"]
    lines = (CORPUS / "code-notes" / "auth.md").read_text(encoding="utf-8").split("\n")
    for reference in (f"#{chunk_id}", str(chunk_id)):
        got = server.call("projmem_get", {"identifier": reference})
        [chunk] = got["structuredContent"]["chunks"]
        assert chunk["headingPath"] == "Auth > Sessions > Session store"
        assert chunk["text"] == "\n".join(lines[chunk["startLine"] - 1 : chunk["endLine"]])
        assert chunk["text"].startswith("### Session store")
        assert chunk["namespaceName"] == "notes"
    missing = server.call("projmem_get", {"identifier": "#999999"})
    assert missing["isError"] is True
    assert missing["structuredContent"]["error"]["code"] == "not-found"


def test_get_by_document_returns_every_chunk_in_order(server: Any) -> None:
    got = server.call("projmem_get", {"identifier": "notes/code-notes/search-pipeline.md"})
    chunks = got["structuredContent"]["chunks"]
    source = (CORPUS / "code-notes" / "search-pipeline.md").read_text(encoding="utf-8")
    assert "\n".join(c["text"] for c in chunks) + "\n" == source
    assert chunks[0]["headingPath"] == ""  # the preamble before the first heading
    assert [c["headingPath"] for c in chunks][
        -1
    ] == "Search pipeline > Stage 4: Reranking > Blending"
    # a fenced "# heading" is not a heading
    auth = server.call("projmem_get", {"identifier": "notes/code-notes/auth.md"})
    paths = [c["headingPath"] for c in auth["structuredContent"]["chunks"]]
    assert "Not a heading: inside a fence" not in " ".join(paths)


def test_multi_get_by_ids_paths_and_pattern(server: Any) -> None:
    none = server.call("projmem_multi_get", {})
    assert none["isError"] is True and "at least one" in text(none)
    by_pattern = server.call("projmem_multi_get", {"pathPattern": "notes/code-notes/%"})
    paths = {c["path"] for c in by_pattern["structuredContent"]["chunks"]}
    assert paths == {"notes/code-notes/auth.md", "notes/code-notes/search-pipeline.md"}
    ids = [c["chunkId"] for c in by_pattern["structuredContent"]["chunks"][:2]]
    mixed = server.call(
        "projmem_multi_get",
        {"chunkIds": [*ids, 424242], "docPaths": ["notes/README.md", "notes/nope.md"]},
    )
    got = mixed["structuredContent"]
    assert [c["chunkId"] for c in got["chunks"][:2]] == ids
    assert got["chunks"][-1]["path"] == "notes/README.md"
    assert "Chunk not found: #424242" in got["notes"]
    assert any("nope.md" in note for note in got["notes"])
    # a whole number beyond the stores' 64-bit ids is the caller's mistake, not a crash (the
    # wire fuzz found it answering internal-error)
    huge = server.call("projmem_multi_get", {"chunkIds": [1e300]})
    assert huge["isError"] is True and "chunkIds is out of range" in text(huge), huge


def test_status_reports_figures_and_namespaces(server: Any) -> None:
    result = server.call("projmem_status", {})
    structured = result["structuredContent"]
    assert structured["documents"] == 3
    assert structured["chunks"] >= 15
    assert structured["documentsByKind"] == {"note": 3}  # no front matter names a kind
    assert structured["embeddingDimension"] is None
    [namespace] = [n for n in structured["namespaces"] if n["name"] == "notes"]
    assert isinstance(namespace["id"], int) and namespace["type"] == "collection"
    scoped = server.call(
        "projmem_search", {"query": "refresh token", "namespaceId": namespace["id"]}
    )
    assert scoped["structuredContent"]["count"] >= 1
    unknown = server.call("projmem_search", {"query": "refresh", "namespaceId": 987})
    assert unknown["structuredContent"]["error"]["code"] == "not-found"
    for line in ("Documents: 3", "Chunks: ", "Namespaces: ", "LLM cache entries: "):
        assert line in text(result)


def test_vector_and_deep_search_without_models_say_why(server: Any) -> None:
    vector = server.call("projmem_vector_search", {"query": "token lifetime"})
    assert vector["isError"] is True  # no vector index yet: a clear, coded error
    assert vector["structuredContent"]["error"]["code"] == "unavailable"
    deep = server.call("projmem_deep_search", {"query": "refresh token rotation"})
    structured = deep["structuredContent"]
    assert structured["mode"] == "deep" and structured["count"] >= 1
    names = [s["name"] for s in structured["stages"]]
    assert names == list(PIPELINE)  # all eight, the ones that need models skipped
    assert all(s["skipped"] for s in structured["stages"] if s["name"] == "query_embedding")
    assert "Pipeline stages:" in text(deep) and "Strong signal: " in text(deep)
    assert structured["results"][0]["rrfScore"] > 0


def test_session_list_status_and_summary_filters(server: Any) -> None:
    listed = server.call("projmem_session_list", {})["structuredContent"]["sessions"]
    assert [s["sessionId"] for s in listed] == [AUTH, LONG_SESSION, COMPACTED, BROKEN]
    by_id = {s["sessionId"]: s for s in listed}
    assert by_id[COMPACTED]["status"] == "compacted"
    assert by_id[AUTH]["status"] == "closed"
    assert by_id[AUTH]["turnCount"] == 4
    assert by_id[BROKEN]["skippedLines"] == 4  # 3 not JSON objects, 1 without a message
    assert by_id[LONG_SESSION]["turnCount"] == 300
    compacted = server.call("projmem_session_list", {"status": "compacted"})
    assert [s["sessionId"] for s in compacted["structuredContent"]["sessions"]] == [COMPACTED]
    limited = server.call("projmem_session_list", {"limit": 2})
    assert limited["structuredContent"]["count"] == 2
    bad = server.call("projmem_session_list", {"status": "sleeping"})
    assert bad["isError"] is True


def test_transcript_format_default_latest_and_paging(server: Any) -> None:
    latest = text(server.call("projmem_session_transcript", {}))
    assert f"Session: {AUTH}" in latest
    assert "--- Turn 1 [user] 2026-02-20T10:30:00.000Z ---" in latest
    assert "--- Turn 2 [assistant] 2026-02-20T10:30:05.000Z ---\nTools: Read, Write, Bash" in latest
    assert "Duration: 6m 30s" in latest
    assert "Files modified: /home/dev/projmem/src/rotation.py, /home/dev/projmem/docs/auth.md" in (
        latest
    )
    assert "Look at the auth notes first." not in latest  # thinking blocks are not the reply
    first = server.call("projmem_session_transcript", {"sessionId": LONG_SESSION})
    assert first["structuredContent"] == {"firstTurn": 1, "lastTurn": 50, "nextTurn": 51}
    assert "More: call again with fromTurn=51" in text(first)
    last = server.call(
        "projmem_session_transcript",
        {"sessionId": LONG_SESSION, "fromTurn": 251, "maxTurns": 100},
    )
    assert last["structuredContent"] == {"firstTurn": 251, "lastTurn": 300, "nextTurn": None}
    broken = text(server.call("projmem_session_transcript", {"sessionId": BROKEN}))
    assert "Skipped lines: 4" in broken and "readers use WAL" in broken
    compacted = text(server.call("projmem_session_transcript", {"sessionId": COMPACTED}))
    assert "being continued from a previous conversation" not in compacted
    missing = server.call("projmem_session_transcript", {"sessionId": "nope"})
    assert missing["structuredContent"]["error"]["code"] == "not-found"


def test_summary_is_validated_stored_exported_and_searchable(server: Any) -> None:
    transcript_file = server.root / "claude" / PROJECT / f"{AUTH}.jsonl"
    before = transcript_file.read_bytes()
    invalid = server.call(
        "projmem_session_update_summary",
        {
            "sessionId": AUTH,
            "overview": " ",
            "decisions": [],
            "outcomes": ["x"],
            "openItems": [""],
            "tags": ["a,b"],
        },
    )
    assert invalid["isError"] is True
    message = text(invalid)
    assert "overview" in message and "openItems" in message and "tag" in message
    unknown = server.call(
        "projmem_session_update_summary",
        {
            "sessionId": "no-such-session",
            "overview": "x",
            "decisions": [],
            "outcomes": [],
            "openItems": [],
            "tags": [],
        },
    )
    assert unknown["structuredContent"]["error"]["code"] == "not-found"
    saved = server.call(
        "projmem_session_update_summary",
        {
            "sessionId": AUTH,
            "overview": "Added refresh token rotation with a quokka-shaped grace window.",
            "decisions": ["Reused refresh tokens revoke the family"],
            "outcomes": ["rotation.py written", "docs updated"],
            "openItems": ["Load-test the refresh endpoint"],
            "tags": ["auth", "tokens"],
        },
    )
    assert saved.get("isError") is None, saved
    note_path = saved["structuredContent"]["notePath"]
    assert note_path == f"sessions/{AUTH}.md"
    note = (server.root / "vault" / f"{AUTH}.md").read_text(encoding="utf-8")
    assert "## Decisions\n\n- Reused refresh tokens revoke the family" in note
    found = server.call("projmem_search", {"query": "quokka"})
    assert found["structuredContent"]["results"][0]["path"] == note_path
    listed = server.call("projmem_session_list", {"hasSummary": True})
    assert [s["sessionId"] for s in listed["structuredContent"]["sessions"]] == [AUTH]
    status = server.call("projmem_status", {})["structuredContent"]
    assert {"name": "sessions", "type": "sessions"}.items() <= {
        k: v for n in status["namespaces"] if n["name"] == "sessions" for k, v in n.items()
    }.items()
    assert transcript_file.read_bytes() == before  # transcripts are read-only
    assert json.loads(json.dumps(saved))  # a plain JSON answer


def test_force_root_hides_chunks_outside_the_root_by_id_too(server: Any) -> None:
    """A chunk id must not reach a document that no path can reach (seed 001 INV-1)."""
    # the session vault must lie inside the root too, or the surface refuses to start
    env = {**server.env, "QMD_SESSIONS_VAULT": str(server.root / "claude" / "vault")}
    outside = server.call("projmem_search", {"query": "Redis sliding expiry"})
    chunk_id = outside["structuredContent"]["results"][0]["chunkId"]
    rooted = StdioServer(env, "--surface", "projmem", "--force-root", str(server.root / "claude"))
    try:
        rooted.initialize()
        got = rooted.call("projmem_get", {"identifier": f"#{chunk_id}"})
        assert got["structuredContent"]["error"]["code"] == "not-found"
        many = rooted.call("projmem_multi_get", {"chunkIds": [chunk_id]})
        assert many["structuredContent"]["chunks"] == []
        assert rooted.call("projmem_search", {"query": "Redis"})["structuredContent"]["count"] == 0
    finally:
        rooted.kill()
