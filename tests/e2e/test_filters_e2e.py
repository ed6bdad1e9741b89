"""Filters end to end: the CLI's --filter and shorthands (REQ-FILTER-008) and REST /query of
both servers (REQ-FILTER-007), over a real index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from adapters.bootstrap import build_app
from tests.http_harness import HttpServer
from tests.mcp_harness import REPO, fixture_env

DAY = 86_400
NOTES = {  # name: (text, file mtime in days since 2024-01-01)
    "old.md": ("# Old\n\nrelease notes for the release train\n", 0),
    "dated.md": ("---\ndate: 2024-06-15\ntags: [ops, release]\n---\n# Dated\n\nrelease\n", 400),
    "new.txt": ("release checklist in a text file\n", 200),
}
JAN_2024 = 1_704_067_200


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("filters")
    (root / "notes").mkdir()
    for name, (text, days) in NOTES.items():
        path = root / "notes" / name
        path.write_text(text, encoding="utf-8")
        os.utime(path, (JAN_2024 + days * DAY, JAN_2024 + days * DAY))
    environment = fixture_env(root)
    app = build_app(env=environment, with_models=False)
    try:
        app.collections.add(str(root / "notes"), "notes", "**/*.{md,txt}")
    finally:
        app.close()
    return environment


def _search(env: dict[str, str], *args: str) -> tuple[int, list[str], str]:
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli.main", "search", "release", "--format", "json", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = json.loads(done.stdout) if done.stdout.strip().startswith("[") else []
    return done.returncode, sorted(r["file"].rsplit("/", 1)[1] for r in found), done.stderr


def test_cli_filters(env: dict[str, str]) -> None:
    assert _search(env)[1] == ["dated.md", "new.txt", "old.md"]
    assert _search(env, "--type", "txt")[1] == ["new.txt"]
    assert _search(env, "--type", "md,TXT")[1] == ["dated.md", "new.txt", "old.md"]
    assert _search(env, "--tag", "ops", "--tag", "release")[1] == ["dated.md"]
    # the document's date: front matter `date` (2024-06-15) wins over the file's mtime
    assert _search(env, "--since", "2024-06-01")[1] == ["dated.md", "new.txt"]
    assert _search(env, "--until", "2024-06-15")[1] == ["dated.md", "old.md"]
    assert _search(env, "--since", "2024-02-01", "--until", "2024-06-14")[1] == []
    raw = json.dumps({"key": "format", "operator": "ne", "value": "md"})
    assert _search(env, "--filter", raw)[1] == ["new.txt"]
    code, _, err = _search(env, "--filter", "{not json")
    assert code != 0 and "--filter is not valid JSON" in err
    code, _, err = _search(env, "--since", "June")
    assert code != 0 and "--since must be an ISO 8601 date" in err


@pytest.fixture(scope="module", params=["spec", "compat"])
def server(request: pytest.FixtureRequest, env: dict[str, str]) -> Iterator[tuple[str, HttpServer]]:
    extra = ["--compat", "2.8.3"] if request.param == "compat" else []
    running = HttpServer(["mcp", "--http", *extra, "--port", "0"], env).start()
    yield request.param, running
    running.stop()


def test_rest_query_filter(server: tuple[str, HttpServer]) -> None:
    kind, running = server
    headers = {"Content-Type": "application/json"}
    body = {"searches": [{"type": "lex", "query": "release"}], "limit": 1, "rerank": False}
    tagged = {**body, "filter": {"key": "tags", "operator": "all", "value": ["ops"]}}
    reply = running.request("POST", "/query", tagged, headers)
    assert reply.status == 200
    results = reply.json()["results"]
    if kind == "compat":  # 2.8.3 ignores fields it does not know, and so do we there
        assert len(results) == 1 and "metadata" not in results[0]
        assert running.request("POST", "/query", {**body, "filter": 3}, headers).status == 200
        return
    assert [r["file"] for r in results] == ["qmd://notes/dated.md"]
    assert results[0]["metadata"]["tags"] == ["ops", "release"]
    bad = running.request("POST", "/query", {**body, "filter": [1]}, headers)
    assert (bad.status, bad.json()) == (400, {"error": "Invalid field: filter (must be an object)"})
    worse = running.request(
        "POST", "/query", {**body, "filter": {"key": "tags", "operator": "has"}}, headers
    )
    assert worse.status == 400
    assert worse.json()["error"].startswith("Invalid filter: filter.operator: unknown operator")
