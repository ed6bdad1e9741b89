"""Seed 004's memory under pressure (REQ-MEM-STORE-002/005): concurrent `store_qa` calls from
two server processes lose and duplicate nothing, and a server SIGKILLed in the middle of
`merge_knowledge` leaves no half-merged group once it starts again."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_memorize_e2e import files_of, memory_env
from tests.figures import report
from tests.http_harness import HttpServer
from tests.mcp_harness import StdioServer

pytestmark = pytest.mark.models

SUBJECTS = [
    ("boil an egg", "cooking eggs"),
    ("generate an SSH key pair", "ssh keys"),
    ("delete a local git branch", "git branching"),
    ("list running Docker containers", "docker containers"),
    ("match an email address with a regex", "regular expressions"),
    ("convert UTC to local time in Python", "time zones"),
]


PHRASINGS = ("How do I", "How can I", "How should I", "How do you", "What is the way to")


def store_over_http(server: HttpServer, question: str, answer: str, topic: str) -> dict[str, Any]:
    reply = server.modern(
        "tools/call",
        {"name": "store_qa", "arguments": {"question": question, "answer": answer, "topic": topic}},
        name="store_qa",
    )
    assert reply.status == 200, reply.body
    result: dict[str, Any] = reply.json()["result"]
    assert result.get("isError") is not True, result
    content: dict[str, Any] = result["structuredContent"]
    return content


def test_concurrent_store_qa_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    env = memory_env(tmp_path)
    http = HttpServer(["mcp", "--http", "--port", "0", "--surface", "memorize"], env).start()
    stdio = StdioServer(env, "--surface", "memorize")
    try:
        stdio.initialize()
        pairs = [
            (f"What is release step {n} of the release checklist?", f"Step {n}: do task {n}.")
            for n in range(20)
        ]
        same = ("Who signs the release?", "The release manager signs it.")
        with ThreadPoolExecutor(max_workers=25) as pool:
            distinct = [
                pool.submit(
                    store_over_http, http, q, a, "Release process" if n % 2 else "release process"
                )
                for n, (q, a) in enumerate(pairs)
            ]
            repeated = [
                pool.submit(store_over_http, http, *same, "release process") for _ in range(5)
            ]
            # meanwhile a second process stores the same identical pair on its own
            beside = stdio.call(
                "store_qa",
                {"question": same[0], "answer": same[1], "topic": "release process"},
                timeout=120,
            )
            stored = [f.result(timeout=300) for f in distinct]
            again = [f.result(timeout=300) for f in repeated]
    finally:
        http.stop()
        stdio.kill()
    assert beside.get("isError") is not True, beside
    ids = [s["id"] for s in stored]
    assert len(set(ids)) == 20
    assert {s["id"] for s in again} | {beside["structuredContent"]["id"]} == {again[0]["id"]}
    assert sum(s["created"] for s in again) + beside["structuredContent"]["created"] == 1
    files = files_of(tmp_path)
    on_disk = sorted(json.loads(t.split("\nid: ")[1].split("\n")[0]) for t in files.values())
    assert on_disk == sorted({*ids, again[0]["id"]}), "every record exactly once on disk"
    with sqlite3.connect(tmp_path / "index.sqlite") as db:
        rows = db.execute("SELECT COUNT(*), COUNT(DISTINCT id) FROM memory_records").fetchone()
        topics = db.execute("SELECT name FROM memory_topics").fetchall()
    assert rows == (21, 21)
    assert len(topics) == 1, topics  # two spellings of one topic, created once
    report("memorize: 25 concurrent store_qa over HTTP + 1 over stdio -> 21 records")


def _answer_samplings(server: StdioServer, until_id: int, rng: random.Random) -> bool:
    """Answer sampling requests until SIGKILL lands at a random moment; True when it did."""
    answered = 0
    while True:
        message = server.receive(timeout=120)
        if message.get("method") == "sampling/createMessage":
            server.send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {
                        "role": "assistant",
                        "content": {"type": "text", "text": f"fused {message['id']}"},
                        "model": "test",
                    },
                }
            )
            answered += 1
            if answered == 2:
                time.sleep(rng.uniform(0.0, 0.04))
                server.process.send_signal(signal.SIGKILL)
                server.process.wait()
                return True
        elif message.get("id") == until_id:
            return False


def half_merged(root: Path) -> int:
    """Groups a kill left half-merged on disk (before any repair): knowledge whose sources are
    not all marked, or marks pointing at knowledge that is not there."""
    qa, knowledge = read_records(root)
    half = sum(
        1 for kid, k in knowledge.items() if any(qa[s]["merged_into"] != kid for s in k["sources"])
    )
    dangling = {q["merged_into"] for q in qa.values() if q["merged"]} - set(knowledge)
    return half + len(dangling)


def read_records(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    qa: dict[str, Any] = {}
    knowledge: dict[str, Any] = {}
    for name, text in files_of(root).items():
        if name.rpartition("/")[2].startswith(".tmp-"):
            continue  # a write the kill cut before its rename: the store never reads these
        fields = {
            line.partition(": ")[0]: json.loads(line.partition(": ")[2])
            for line in text.split("\n---\n")[0].splitlines()[1:]
        }
        (qa if fields["kind"] == "qa" else knowledge)[fields["id"]] = fields
    return qa, knowledge


def check_no_half_merge(root: Path, expected_qa: int) -> tuple[int, int]:
    qa, knowledge = read_records(root)
    assert len(qa) == expected_qa, "no QA record is lost"
    for kid, k in knowledge.items():
        for source in k["sources"]:
            assert qa[source]["merged"] is True and qa[source]["merged_into"] == kid
    for q in qa.values():
        if q["merged"]:
            assert q["merged_into"] in knowledge, "merged into a knowledge record that exists"
    return len(knowledge), sum(q["merged"] for q in qa.values())


def test_sigkill_during_merge_leaves_no_half_merged_group(tmp_path: Path) -> None:
    env = {**memory_env(tmp_path), "QMD_MEMORY_FUSION_THRESHOLD": "0.6"}
    server = StdioServer(env, "--surface", "memorize")
    server.request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {"sampling": {}},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )
    for subject, topic in SUBJECTS:
        for how in PHRASINGS:
            result = server.call(
                "store_qa",
                {
                    "question": f"{how} {subject}?",
                    "answer": f"Answer about {subject}.",
                    "topic": topic,
                },
                timeout=120,
            )
            assert result.get("isError") is not True, result
    server.close()
    expected = len(PHRASINGS) * len(SUBJECTS)
    rng = random.Random(7)
    kills = halves = 0
    for _round in range(6):
        server = StdioServer(env, "--surface", "memorize")
        server.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"sampling": {}},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        # the restart repaired whatever the last kill left: check before merging again
        server.call("query_qa", {"question": "x", "context": "cooking eggs"}, timeout=120)
        made, merged = check_no_half_merge(tmp_path, expected)
        assert merged == len(PHRASINGS) * made
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 77,
                "method": "tools/call",
                "params": {"name": "merge_knowledge", "arguments": {}},
            }
        )
        killed = _answer_samplings(server, 77, rng)
        kills += killed
        halves += half_merged(tmp_path) > 0
        if not killed:
            server.close()
            break
    server = StdioServer(env, "--surface", "memorize")
    server.initialize()
    server.call("query_qa", {"question": "x", "context": "cooking eggs"}, timeout=120)
    server.close()
    made, merged = check_no_half_merge(tmp_path, expected)
    assert kills >= 2 and made >= 2 and merged == len(PHRASINGS) * made
    report(
        f"memorize: {kills} SIGKILLs during merge_knowledge ({halves} left a half-merged group "
        f"on disk, repaired at the next start), {made} groups merged, none half"
    )
