"""The container's pieces, run without Docker (no daemon here) as the Dockerfile and the compose
files write them (deploy/README.md, REQ-LDIMS-DEPLOY-005): the runtime stage's ENV and CMD
start the LDIMS HTTP service behind the guard; the compose files' `index` command indexes the
extracted formats; the `models` stage's preparation gives the embedding model the runtime ENV
names, with which a semantic search uses vectors; and the two-service compose file's commands
and variables put the MCP service in front of a backend."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.http_harness import HttpServer
from tests.mcp_harness import REPO, fixture_env
from tooling.docgen import write_docx, write_pdf

ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _stages() -> dict[str, list[str]]:
    """The Dockerfile's instructions per stage (continuations joined); the last is `runtime`."""
    text = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    stages: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("FROM "):
            named = re.search(r" AS (\S+)", line)
            lines = stages.setdefault(named.group(1) if named else "runtime", [])
        elif line.strip() and not line.startswith("#"):
            lines.append(line)
    return stages


def _dockerfile() -> tuple[dict[str, str], list[str]]:
    final = _stages()["runtime"]
    env: dict[str, str] = {}
    for line in final:
        if line.startswith("ENV "):
            env.update(dict(re.findall(r"(\w+)=(\S+)", line)))
    cmd = [line for line in final if line.startswith("CMD ")][-1]
    entry = [line for line in final if line.startswith("ENTRYPOINT ")][-1]
    assert json.loads(entry[len("ENTRYPOINT ") :]) == ["qmd"]
    assert "USER qmd" in final
    return env, json.loads(cmd[len("CMD ") :])


def _compose(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO / "deploy" / name).read_text(encoding="utf-8"))
    return loaded


def _image_env(tmp_path: Path) -> dict[str, str]:
    """The runtime ENV, its paths moved under tmp_path (the /data volume, the model folder),
    and a `qmd` on PATH that runs this checkout."""
    image_env, _ = _dockerfile()
    env = fixture_env(tmp_path)
    for key in ("INDEX_PATH", "QMD_CONFIG_DIR", "XDG_CACHE_HOME"):
        env[key] = str(tmp_path / image_env[key].lstrip("/"))
    for key in ("QMD_EMBED_MODEL", "QMD_RERANK_MODEL", "QMD_GENERATE_MODEL"):
        value = image_env[key]
        env[key] = str(tmp_path / value.lstrip("/")) if value.startswith("/") else value
    shim = tmp_path / "bin" / "qmd"
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m adapters.cli "$@"\n', "utf-8")
    shim.chmod(0o755)
    env["PATH"] = f"{shim.parent}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    return env


def _documents(folder: Path) -> Path:
    """What a document system holds: a PDF, a DOCX and a note."""
    folder.mkdir(parents=True, exist_ok=True)
    write_pdf(
        folder / "finance.pdf",
        [["Quarterly revenue grew by ten percent, driven by subscription renewals."]],
        title="Finance report",
    )
    write_docx(
        folder / "handbook.docx",
        "Employee handbook",
        [("Vacation", ["Employees accrue holiday leave every month they work."])],
    )
    (folder / "notes.md").write_text("# Notes\n\nThe office plants need water.\n", "utf-8")
    return folder


def _index_command(compose: dict[str, Any], docs: Path) -> str:
    service = compose["services"]["index"]
    assert service["entrypoint"] == ["/bin/sh", "-c"]
    [command] = service["command"]
    return str(command).replace("/docs", str(docs))


def _run_shell(command: str, env: dict[str, str]) -> None:
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _search(server: HttpServer, arguments: dict[str, Any], host: str) -> dict[str, Any]:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "searchDocuments", "arguments": arguments},
    }
    reply = server.request("POST", "/mcp", call, {**ACCEPT, "Host": host})
    assert reply.status == 200, reply.text
    message = reply.json() if reply.text.startswith("{") else reply.events()[-1]
    parsed: dict[str, Any] = json.loads(message["result"]["content"][0]["text"])
    return parsed


def _served_args(command: list[str]) -> list[str]:
    return [*command[: command.index("--port")], "--port", "0"]


def test_the_image_command_serves_ldims_behind_the_guard(tmp_path: Path) -> None:
    _, command = _dockerfile()
    assert command[:2] == ["mcp", "--surface"] and "0.0.0.0" in command
    service_env = _compose("compose.yaml")["services"]["qmd"]["environment"]
    env = _image_env(tmp_path)
    args = _served_args(command)
    refused = subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode != 0 and "allow-list" in refused.stderr
    server = HttpServer(args, {**env, **{k: str(v) for k, v in service_env.items()}}).start()
    try:
        assert server.request("GET", "/health").status == 200
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        inside = server.request("POST", "/mcp", listing, {**ACCEPT, "Host": "qmd:8181"})
        assert inside.status == 200 and "searchDocuments" in inside.text
        outside = server.request("POST", "/mcp", listing, {**ACCEPT, "Host": "evil.example"})
        assert outside.status == 403
    finally:
        server.stop()


def test_compose_indexes_the_extracted_formats(tmp_path: Path) -> None:
    """REQ-LDIMS-DEPLOY-005: the `index` job registers PDF and DOCX, not only text files
    (its `qmd embed` step needs llama.cpp: the `models` test below runs the whole job)."""
    compose = _compose("compose.yaml")
    two = _compose("compose.two-services.yaml")
    assert two["services"]["index"]["command"] == compose["services"]["index"]["command"]
    command = _index_command(compose, _documents(tmp_path / "docs"))
    head, _, tail = command.rpartition(" && ")
    assert tail == "qmd embed"
    env = _image_env(tmp_path)
    _run_shell(head, env)
    _run_shell(head, env)  # again: the collection exists, so it updates
    _, image_command = _dockerfile()
    service_env = {k: str(v) for k, v in compose["services"]["qmd"]["environment"].items()}
    server = HttpServer(_served_args(image_command), {**env, **service_env}).start()
    try:
        for word, name in (("renewals", "docs/finance.pdf"), ("holiday", "docs/handbook.docx")):
            found = _search(server, {"query": word, "filters": {"searchMode": "exact"}}, "qmd")
            assert [r["documentId"] for r in found["results"]] == [name]
    finally:
        server.stop()


@pytest.mark.models
def test_the_images_model_makes_semantic_search_real(tmp_path: Path) -> None:
    """REQ-LDIMS-DEPLOY-005: the `models` stage's command prepares the model the runtime ENV
    names; after the compose `index` job (which embeds), `semantic` uses vectors and finds a
    PDF by meaning alone."""
    stages = _stages()
    [prepare] = [x for x in stages["models"] if x.startswith("RUN ") and "prepare_models" in x]
    argv = shlex.split(prepare[len("RUN ") :])
    assert argv[:2] == ["python", "scripts/prepare_models.py"] and "--only" in argv
    built = argv[argv.index("--models-dir") + 1]
    [copy] = [line for line in stages["runtime"] if line.startswith("COPY --from=models ")]
    source, target = copy.split()[2:4]
    assert source == built
    env = _image_env(tmp_path)
    model_dir = tmp_path / target.lstrip("/")
    argv[argv.index("--models-dir") + 1] = str(model_dir)
    done = subprocess.run(
        [sys.executable, *argv[1:], "--no-install"],  # the test's venv has the packages
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert Path(env["QMD_EMBED_MODEL"]).is_file()
    compose = _compose("compose.yaml")
    _run_shell(_index_command(compose, _documents(tmp_path / "docs")), env)
    _, image_command = _dockerfile()
    service_env = {k: str(v) for k, v in compose["services"]["qmd"]["environment"].items()}
    server = HttpServer(_served_args(image_command), {**env, **service_env}).start()
    try:
        # no word in common with the PDF, and close enough in meaning to clear the
        # relevance floor plus the margin a document sharing no word needs (REQ-LDIMS-TOOL-006:
        # MiniLM puts it at about 0.54; "how much did sales grow", at 0.41, no longer clears it)
        found = _search(server, {"query": "earnings growth each quarter", "maxResults": 1}, "qmd")
        assert "effectiveSearchMode" not in found["searchMetadata"], found["searchMetadata"]
        assert [r["documentId"] for r in found["results"]] == ["docs/finance.pdf"]
    finally:
        server.stop()


def test_the_two_service_compose_file_runs_as_written(tmp_path: Path) -> None:
    """REQ-LDIMS-DEPLOY-002 with deploy/compose.two-services.yaml's commands and variables:
    the backend indexes the documents, the MCP service (the image's command) serves from it."""
    compose = _compose("compose.two-services.yaml")
    backend_service, mcp_service = compose["services"]["backend"], compose["services"]["mcp"]
    assert "command" not in mcp_service  # the image's command
    backend_env = _image_env(tmp_path / "backend")
    _run_shell(
        _index_command(compose, _documents(tmp_path / "docs")).rpartition(" && ")[0],
        backend_env,
    )
    backend_vars = {k: str(v) for k, v in backend_service["environment"].items()}
    backend = HttpServer(
        _served_args(backend_service["command"]), {**backend_env, **backend_vars}
    ).start()
    try:
        api = "/api/documents?query=renewals"
        inside = backend.request("GET", api, headers={"Host": "backend:8181"})
        assert inside.status == 200 and inside.json()["results"][0]["documentId"] == (
            "docs/finance.pdf"
        )
        assert backend.request("GET", api, headers={"Host": "evil.example"}).status == 403
        mcp_vars = {k: str(v) for k, v in mcp_service["environment"].items()}
        base = mcp_vars["LDIMS_API_BASE_URL"]
        assert base == "http://backend:8181/api"
        mcp_vars["LDIMS_API_BASE_URL"] = base.replace("backend:8181", f"127.0.0.1:{backend.port}")
        _, image_command = _dockerfile()
        mcp = HttpServer(
            _served_args(image_command), {**_image_env(tmp_path / "mcp"), **mcp_vars}
        ).start()
        try:
            found = _search(mcp, {"query": "holiday leave"}, "mcp:8181")
            assert found["results"][0]["documentId"] == "docs/handbook.docx"
        finally:
            mcp.stop()
    finally:
        backend.stop()


def test_the_image_builds_the_rank_function_where_it_installs_the_package(
    tmp_path: Path,
) -> None:
    """REQ-SEARCH-RANKCACHE-001 in the image: the build stage installs SQLite's headers and
    runs the build step as written, which must compile qmd_rank.c beside the installed
    package; run from /src, `python -m` would build into the copied sources instead, which
    the runtime stage does not copy."""
    build = _stages()["build"]
    apt = next(line for line in build if "apt-get install" in line)
    assert "libsqlite3-dev" in apt.split() and "build-essential" in apt.split()
    install = next(line for line in build if "pip install ." in line)
    commands = [part.strip() for part in install.removeprefix("RUN ").split("&&")]
    after = commands[commands.index("/opt/qmd/bin/pip install .") + 1 :]
    assert after[0] == "cd /tmp", commands
    python = shlex.split(after[1])
    assert python[1:] == ["-m", "adapters.sqlite.rank_ext"], python
    # the step as written, with this checkout installed as the image installs it: the
    # library lands beside the package the interpreter imports from outside the sources
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        [sys.executable, *python[1:]],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (site / "adapters" / "sqlite" / "native" / "qmd_rank.so").is_file()
