"""The container's command, run without Docker (no daemon here): the Dockerfile's ENV and CMD
start the LDIMS HTTP service, which answers /health, admits the compose file's allow-listed
Host and refuses others, and will not listen on every interface without an allow-list."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.http_harness import HttpServer
from tests.mcp_harness import REPO, fixture_env


def _dockerfile() -> tuple[dict[str, str], list[str]]:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    final = text.split("\nFROM ")[-1]  # the runtime stage
    env: dict[str, str] = {}
    for line in final.splitlines():
        if line.startswith("ENV "):
            env.update(dict(re.findall(r"(\w+)=(\S+)", line)))
    cmd = [line for line in final.splitlines() if line.startswith("CMD ")][-1]
    entry = [line for line in final.splitlines() if line.startswith("ENTRYPOINT ")][-1]
    assert json.loads(entry[len("ENTRYPOINT ") :]) == ["qmd"]
    assert "USER qmd" in final.splitlines()
    return env, json.loads(cmd[len("CMD ") :])


def test_the_image_command_serves_ldims_behind_the_guard(tmp_path: Path) -> None:
    image_env, command = _dockerfile()
    assert command[:2] == ["mcp", "--surface"] and "0.0.0.0" in command
    compose = yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text(encoding="utf-8"))
    service_env = compose["services"]["qmd"]["environment"]
    # the image's paths, moved under tmp_path (the /data volume)
    env = fixture_env(tmp_path)
    for key in ("INDEX_PATH", "QMD_CONFIG_DIR", "XDG_CACHE_HOME"):
        env[key] = str(tmp_path / image_env[key].lstrip("/"))
    args = [*command[: command.index("--port")], "--port", "0"]
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
        accept = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        inside = server.request("POST", "/mcp", listing, {**accept, "Host": "qmd:8181"})
        assert inside.status == 200 and "searchDocuments" in inside.text
        outside = server.request("POST", "/mcp", listing, {**accept, "Host": "evil.example"})
        assert outside.status == 403
    finally:
        server.stop()
