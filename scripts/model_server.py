"""Serve the prepared test models (.models/) over an OpenAI-compatible API on loopback.

Runs llama-cpp-python's own server (`llama_cpp.server`, installed with its `server` extra by
scripts/setup.sh) with two models: `minilm` (all-MiniLM-L6-v2, embeddings) and `gemma`
(gemma-3-270m, chat completions with logprobs, for expansion and yes/no reranking). Used by the
remote-model tests, the `ours-spec-remote` conformance profile and benchmarks/bench_remote.py.

    python scripts/model_server.py serve [--port 8081] [--api-key-file F]
    python scripts/model_server.py run [--all-roles] -- qmd embed
        # starts a server on a free port, runs the command with QMD_EMBED_MODEL (and, with
        # --all-roles, QMD_RERANK_MODEL / QMD_GENERATE_MODEL) pointing at it, then stops it.

`serve` stops its `llama_cpp.server` child on SIGTERM, SIGHUP and Ctrl-C alike. Env for tests:
QMD_MODELS_DIR (default .models), QMD_MODEL_SERVER_MODULE (default llama_cpp.server).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Both overridable so tests can run the real signal handling around a stand-in server.
MODELS_DIR = Path(os.environ.get("QMD_MODELS_DIR") or REPO / ".models")
SERVER_MODULE = os.environ.get("QMD_MODEL_SERVER_MODULE") or "llama_cpp.server"
EMBED_ALIAS = "minilm"
CHAT_ALIAS = "gemma"
EMBED_FILE = "all-MiniLM-L6-v2-f16.gguf"
CHAT_FILE = "gemma-3-270m-q4_k_m.gguf"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_config(
    port: int,
    *,
    api_key: str | None = None,
    with_chat: bool = True,
    threads: int | None = None,
) -> dict[str, Any]:
    """llama_cpp.server's config file: the embedder first (the default model)."""
    threads = threads or os.cpu_count() or 1
    models: list[dict[str, Any]] = [
        {
            "model": str(MODELS_DIR / EMBED_FILE),
            "model_alias": EMBED_ALIAS,
            "embedding": True,
            # As the in-process adapter: MiniLM's 512 positions, one micro-batch per text.
            "n_ctx": 512,
            "n_batch": 512,
            "n_ubatch": 512,
            "n_threads": threads,
            "n_threads_batch": threads,
            "verbose": False,
        }
    ]
    if with_chat:
        models.append(
            {
                "model": str(MODELS_DIR / CHAT_FILE),
                "model_alias": CHAT_ALIAS,
                "n_ctx": 2048,
                "logits_all": True,  # chat logprobs (the yes/no reranker) need every logit
                "n_threads": threads,
                "n_threads_batch": threads,
                "verbose": False,
            }
        )
    config: dict[str, Any] = {"host": "127.0.0.1", "port": port, "models": models}
    if api_key:
        config["api_key"] = api_key
    return config


@dataclass
class ModelServer:
    """A running `llama_cpp.server`; `base_url` ends in /v1."""

    port: int
    process: subprocess.Popen[bytes]
    workdir: Path
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reference(self, alias: str, options: str = "") -> str:
        return f"openai:{alias}@{self.base_url}" + (f"?{options}" if options else "")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=15)

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
        except OSError:
            return ""


def start_server(
    *,
    port: int | None = None,
    api_key: str | None = None,
    with_chat: bool = True,
    threads: int | None = None,
    workdir: Path | None = None,
    startup_timeout: float = 120.0,
) -> ModelServer:
    for name in (EMBED_FILE, CHAT_FILE if with_chat else EMBED_FILE):
        if not (MODELS_DIR / name).is_file():
            raise FileNotFoundError(
                f"{MODELS_DIR / name} is missing: run `python scripts/prepare_models.py`"
            )
    port = port or free_port()
    workdir = workdir or Path(tempfile.mkdtemp(prefix="qmd-model-server-"))
    config_path = workdir / "llama-server.json"
    config_path.write_text(
        json.dumps(server_config(port, api_key=api_key, with_chat=with_chat, threads=threads)),
        encoding="utf-8",
    )
    log_path = workdir / "llama-server.log"
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as in-process (adapters/models/llama.py)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", SERVER_MODULE, "--config_file", str(config_path)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    server = ModelServer(port, process, workdir, log_path)
    try:
        _wait_until_up(server, api_key, startup_timeout)
    except BaseException:  # a timeout, or a signal while it loads: never leave it running
        server.stop()
        raise
    return server


def _wait_until_up(server: ModelServer, api_key: str | None, startup_timeout: float) -> None:
    deadline = time.monotonic() + startup_timeout
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"llama_cpp.server exited ({server.process.returncode}):\n{server.log()}"
            )
        try:
            request = urllib.request.Request(server.base_url + "/models", headers=headers)
            with urllib.request.urlopen(request, timeout=5) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            time.sleep(0.2)
    raise RuntimeError(f"llama_cpp.server did not answer within {startup_timeout} s")


class StopSignalError(Exception):
    """SIGTERM or SIGHUP arrived: unwind so that `finally` stops the server child."""


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP unwind like Ctrl-C does; by default they would end this process at
    once and leave `llama_cpp.server` running, holding its port. A second signal while the
    child is being stopped is ignored so that the stop completes."""

    def stop(signum: int, _frame: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        raise StopSignalError(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


def _run(args: argparse.Namespace) -> int:
    command = [c for c in args.command if c != "--"]
    if not command:
        print("model_server.py run: give a command after --", file=sys.stderr)
        return 2
    server = start_server(with_chat=args.all_roles)
    try:
        env = dict(os.environ)
        env["QMD_EMBED_MODEL"] = server.reference(EMBED_ALIAS)
        if args.all_roles:
            env["QMD_RERANK_MODEL"] = server.reference(CHAT_ALIAS, "rerank=chat")
            env["QMD_GENERATE_MODEL"] = server.reference(CHAT_ALIAS)
        child = subprocess.Popen(command, env=env)
        # Forward termination so a harness that stops us stops the command too.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
        return child.wait()
    finally:
        server.stop()


def _serve(args: argparse.Namespace) -> int:
    api_key = None
    if args.api_key_file:
        api_key = Path(args.api_key_file).read_text(encoding="utf-8").strip()
    _stop_on_signals()
    server: ModelServer | None = None
    try:
        # A signal while this loads unwinds start_server, which stops its child itself.
        server = start_server(port=args.port, api_key=api_key, with_chat=not args.embed_only)
        print(
            f"serving {EMBED_ALIAS}, {CHAT_ALIAS} at {server.base_url} (Ctrl-C stops)", flush=True
        )
        server.process.wait()
    except (KeyboardInterrupt, StopSignalError):
        pass
    finally:
        if server is not None:
            server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    serve = sub.add_parser("serve", help="serve until interrupted")
    serve.add_argument("--port", type=int, default=8081)
    serve.add_argument("--api-key-file")
    serve.add_argument("--embed-only", action="store_true")
    run = sub.add_parser("run", help="run a command against a fresh server")
    run.add_argument("--all-roles", action="store_true")
    run.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    return _run(args) if args.action == "run" else _serve(args)


if __name__ == "__main__":
    sys.exit(main())
