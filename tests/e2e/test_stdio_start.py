"""What a `qmd mcp` start on stdio costs in imports: the HTTP stack (h11, uvicorn, the routes)
serves no stdio session, and the conformance suite starts a server per case (about 1,000 a CI
run), so each start that imported it paid about 0.1 s of CPU for nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp_harness import REPO, initialize_request

# Runs `main` in this interpreter and writes the modules left imported to the file named by
# $MODULES_OUT (a stdio server keeps stdout for its frames).
_MODULES_AFTER = (
    "import json, os, sys\n"
    "from adapters.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "with open(os.environ['MODULES_OUT'], 'w') as out: json.dump(sorted(sys.modules), out)\n"
    "sys.exit(code)\n"
)
HTTP_STACK = (
    "adapters.http.app",
    "adapters.http.main",
    "adapters.http.legacy_sse",
    "uvicorn",
    "h11",
)


@pytest.mark.parametrize("surface", [["--compat", "2.8.3"], ["--surface", "spec"]])
def test_a_stdio_server_imports_none_of_the_http_stack(tmp_path: Path, surface: list[str]) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        "HOME": str(tmp_path),
        "INDEX_PATH": str(tmp_path / "index.sqlite"),
        "QMD_CONFIG_DIR": str(tmp_path / "config"),
        "MODULES_OUT": str(tmp_path / "modules.json"),
    }
    done = subprocess.run(
        [sys.executable, "-c", _MODULES_AFTER, "mcp", *surface],
        input=json.dumps(initialize_request()) + "\n",
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[0])["id"] == 1  # it served the session
    modules = json.loads((tmp_path / "modules.json").read_text(encoding="utf-8"))
    assert "adapters.mcp.stdio" in modules
    loaded = [m for m in modules if m.startswith(HTTP_STACK)]
    assert loaded == []
