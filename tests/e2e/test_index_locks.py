"""Writer locks are per index (issue 26): `qmd update` / `qmd embed` of one named index never
blocks another index in the same folder, and a refusal or a wait names the index and the
process that holds it. Real `qmd` processes; the holder is stopped (SIGSTOP) while it holds
its lock, so the timing is deterministic."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from adapters.cli.runtime import lock_file_path
from adapters.postgres.store import PostgresIndex
from tests.mcp_harness import REPO, fixture_env
from tests.postgres_server import drop_schema, fresh_schema_url

EMBED_MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"
FILES = 400


def qmd(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        env=env,
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", *args],
        env=env,
        cwd=str(REPO),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def corpus(root: Path, round_: int, files: int = FILES) -> Path:
    """Enough files that an update is still writing when its lock is caught."""
    folder = root / "notes"
    folder.mkdir(exist_ok=True)
    for i in range(files):
        (folder / f"n{i}.md").write_text(
            f"# Note {i}\n\nround {round_} " + "words of a note " * 40 + "\n", encoding="utf-8"
        )
    return folder


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environment = {**fixture_env(tmp_path), "PYTHONPATH": str(REPO)}
    environment.pop("INDEX_PATH")  # --index NAME: NAME.sqlite, all in one cache folder
    return environment


def lock_file_says(path: str) -> Callable[[], str]:
    def probe() -> str:
        try:
            return Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""

    return probe


def advisory_lock_says(url: str, name: str) -> Callable[[], str]:
    index = PostgresIndex.open(url)

    def probe() -> str:
        return index.lock_holder(name) or ""

    probe.close = index.close  # type: ignore[attr-defined]
    return probe


@contextmanager
def held(
    env: dict[str, str], probe: Callable[[], str], args: tuple[str, ...], remake: Path | None
) -> Iterator[subprocess.Popen[str]]:
    """Run `qmd ARGS` and stop it (SIGSTOP) as soon as `probe` (the lock's own record of its
    holder) names it, i.e. while it holds the lock; the block runs with it stopped, then it
    finishes. `remake`: a folder to rewrite before another try if a run ended uncaught."""
    for attempt in range(5):
        if remake is not None and attempt:
            corpus(remake.parent, attempt + 10)
        process = start(env, *args)
        while process.poll() is None:
            if f"pid {process.pid}" in probe():
                os.kill(process.pid, signal.SIGSTOP)
                try:
                    yield process
                finally:
                    os.kill(process.pid, signal.SIGCONT)
                    _, err = process.communicate(timeout=300)
                assert process.returncode == 0, err
                return
            time.sleep(0.002)
        process.communicate()
    raise AssertionError(f"qmd {' '.join(args)} was never caught holding its lock")


def wait_for_line(process: subprocess.Popen[str], needle: str, timeout: float = 60) -> str:
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if needle in line:
            return line
        if not line and process.poll() is not None:
            break
    raise AssertionError(f"no line with {needle!r} from qmd")


def test_an_update_of_one_named_index_does_not_block_another_in_the_same_folder(
    tmp_path: Path, env: dict[str, str]
) -> None:
    notes = corpus(tmp_path, 0)
    for name in ("one", "two"):
        done = qmd(env, "--index", name, "collection", "add", str(notes), "--name", "notes")
        assert done.returncode == 0, done.stderr
    one = str(Path(env["XDG_CACHE_HOME"]) / "qmd" / "one.sqlite")
    two = str(Path(env["XDG_CACHE_HOME"]) / "qmd" / "two.sqlite")
    assert os.path.dirname(one) == os.path.dirname(two)
    corpus(tmp_path, 1)  # work for the holder
    probe = lock_file_says(lock_file_path(one, "update"))
    with held(env, probe, ("--index", "one", "update"), notes) as holder:
        # the other index updates at once (before: it waited on the folder's one lock file)
        other = qmd(env, "--index", "two", "update", timeout=60)
        assert other.returncode == 0, other.stderr
        assert "Another update" not in other.stderr
        # the same index waits, naming the index and the holder
        waiter = start(env, "--index", "one", "update")
        line = wait_for_line(waiter, "Another update")
        assert one in line, line
        assert f"pid {holder.pid}: qmd --index one update" in line, line
    assert waiter.wait(timeout=300) == 0


@pytest.mark.models
def test_an_embed_refusal_names_the_index_and_its_holder(
    tmp_path: Path, env: dict[str, str]
) -> None:
    env = {**env, "QMD_EMBED_MODEL": str(EMBED_MODEL)}
    notes = corpus(tmp_path, 0, files=3)  # an embed holds its lock from before the model loads
    for name in ("one", "two"):
        done = qmd(env, "--index", name, "collection", "add", str(notes), "--name", "notes")
        assert done.returncode == 0, done.stderr
    one = str(Path(env["XDG_CACHE_HOME"]) / "qmd" / "one.sqlite")
    probe = lock_file_says(lock_file_path(one, "embed"))
    with held(env, probe, ("--index", "one", "embed"), None) as holder:
        refused = qmd(env, "--index", "one", "embed")
        assert refused.returncode == 1
        assert "Another embed process is already running" in refused.stderr
        assert one in refused.stderr, refused.stderr
        assert f"pid {holder.pid}: qmd --index one embed" in refused.stderr, refused.stderr
        # another named index in the same folder embeds meanwhile
        other = qmd(env, "--index", "two", "embed", timeout=600)
        assert other.returncode == 0, other.stderr
        assert "Another embed" not in other.stderr


@pytest.mark.postgres
def test_a_postgresql_update_wait_names_its_holder(tmp_path: Path, env: dict[str, str]) -> None:
    url, schema = fresh_schema_url()
    pg_env = {**env, "INDEX_PATH": url}
    try:
        notes = corpus(tmp_path, 0)
        done = qmd(pg_env, "collection", "add", str(notes), "--name", "notes")
        assert done.returncode == 0, done.stderr
        corpus(tmp_path, 1)
        probe = advisory_lock_says(url, "update")
        try:
            with held(pg_env, probe, ("update",), notes) as holder:
                waiter = start(pg_env, "update")
                line = wait_for_line(waiter, "Another update", timeout=120)
                assert schema in line, line
                assert f"pid {holder.pid} on " in line and "qmd update" in line, line
        finally:
            probe.close()  # type: ignore[attr-defined]
        assert waiter.wait(timeout=300) == 0
    finally:
        drop_schema(schema)
