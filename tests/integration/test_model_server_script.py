"""`scripts/model_server.py serve` is a real process here, and so is its child: a stand-in for
`llama_cpp.server` (QMD_MODEL_SERVER_MODULE) that reads the config file it is given and answers
`/v1/models` on the configured port, as the real one does. SIGTERM to the script stops the
child: nothing is left running or holding the port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "model_server.py"

STAND_IN = """
import argparse, http.server, json, os, pathlib
parser = argparse.ArgumentParser()
parser.add_argument("--config_file")
config = json.loads(pathlib.Path(parser.parse_args().config_file).read_text())
pathlib.Path(os.environ["STAND_IN_PID"]).write_text(str(os.getpid()))

class Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.end_headers()
        self.wfile.write(b'{"data": []}')

    def log_message(self, *args):
        pass

http.server.HTTPServer((config["host"], config["port"]), Models).serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    # A zombie has let go of everything (its port too); only its parent's wait remains.
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    (tmp_path / "stand_in_llama_server.py").write_text(STAND_IN)
    models = tmp_path / "models"
    models.mkdir()
    for name in ("all-MiniLM-L6-v2-f16.gguf", "gemma-3-270m-q4_k_m.gguf"):
        (models / name).write_bytes(b"GGUF")  # only their presence is checked before start
    pid_file = tmp_path / "child.pid"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
        "QMD_MODELS_DIR": str(models),
        "QMD_MODEL_SERVER_MODULE": "stand_in_llama_server",
        "STAND_IN_PID": str(pid_file),
    }
    yield env, pid_file
    if pid_file.exists():  # never leave a child behind, whatever the test found
        pid = int(pid_file.read_text())
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_sigterm_stops_the_server_child(stand_in: tuple[dict[str, str], Path]) -> None:
    env, pid_file = stand_in
    port = _free_port()
    serve = subprocess.Popen(
        [sys.executable, str(SCRIPT), "serve", "--port", str(port), "--embed-only"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert serve.stdout is not None
        banner = serve.stdout.readline()
        assert f"127.0.0.1:{port}/v1" in banner, banner + serve.stdout.read()
        child = int(pid_file.read_text())
        assert _alive(child)
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "llama_cpp.server's stand-in outlived model_server.py"
    with socket.socket() as sock:
        # SO_REUSEADDR passes over the closed connections' TIME_WAIT, never over a listener.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()  # the port is free again
