"""`qmd index copy` holds its destination's writers' lock from staging to publishing
(REQ-INDEX-COPY-LOCK-001), and what a killed copy leaves is found and removed
(REQ-INDEX-COPY-STALE-001): issue 33, finding 4. Real `qmd` processes; a copy is stopped
(SIGSTOP) or killed (SIGKILL) at the moment the test needs, seen from outside (its staging
file, its lock), so the timing is deterministic."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from adapters.postgres.url import split_schema
from adapters.sqlite.store import SqliteIndex
from tests.mcp_harness import REPO, build_fixture_index
from tests.postgres_server import drop_schema, fresh_schema_url

BUSY = "being written by another process"


def qmd(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
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
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The fixture corpora indexed into a SQLite file; an environment for copies (its own
    config folder, so a destination's `index.yml` is its own)."""
    _, env = build_fixture_index(tmp_path)
    return Path(env["INDEX_PATH"]), {**env, "PYTHONPATH": str(REPO)}


def staging_files(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.parent.iterdir() if p.name.endswith(".copying"))


@contextmanager
def caught(
    env: dict[str, str], args: tuple[str, ...], probe: Callable[[int], bool], how: int
) -> Iterator[subprocess.Popen[str]]:
    """Run `qmd ARGS` and send it `how` (SIGSTOP or SIGKILL) as soon as `probe(pid)` says it
    is where the test wants it; the block runs then (a stopped copy is continued after)."""
    for _ in range(5):
        process = start(env, *args)
        while process.poll() is None:
            if probe(process.pid):
                os.kill(process.pid, how)
                try:
                    yield process
                finally:
                    if how == signal.SIGSTOP:
                        os.kill(process.pid, signal.SIGCONT)
                    process.communicate(timeout=300)
                return
            time.sleep(0.002)
        process.communicate()
    raise AssertionError(f"qmd {' '.join(args)} was never caught")


def documents_of(location: str, collection: str) -> int:
    if location.startswith("postgresql://"):
        conninfo, schema = split_schema(location)
        with psycopg.connect(conninfo, options=f"-c search_path={schema}") as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM documents WHERE collection = %s AND active = 1",
                (collection,),
            ).fetchone()
        return int(row[0]) if row else 0
    index = SqliteIndex.open(location)
    try:
        raw = index.connection.raw
        query = "SELECT COUNT(*) FROM documents WHERE collection = ? AND active = 1"
        return int(raw.execute(query, (collection,)).fetchone()[0])
    finally:
        index.close()


def extra_folder(root: Path) -> Path:
    folder = root / "extra"
    folder.mkdir()
    for i in range(3):
        (folder / f"x{i}.md").write_text(f"# Extra {i}\n\nadded during a copy\n", "utf-8")
    return folder


# -- SQLite ---------------------------------------------------------------------------------


def test_two_copies_into_one_file_cannot_both_succeed(
    tmp_path: Path, source: tuple[Path, dict[str, str]]
) -> None:
    """Before: both reported success, the second replacing the first's file."""
    src, env = source
    dest = tmp_path / "out" / "copy.sqlite"
    dest.parent.mkdir()
    args = ("index", "copy", str(src), str(dest))
    with caught(env, args, lambda _pid: bool(staging_files(dest)), signal.SIGSTOP) as first:
        second = qmd(env, *args)
        assert second.returncode == 1, second.stdout
        assert BUSY in second.stderr and f"pid {first.pid}: qmd index copy" in second.stderr
        assert "Traceback" not in second.stderr
    assert first.returncode == 0, first.stderr
    assert documents_of(str(dest), "handbook") == documents_of(str(src), "handbook") > 0
    assert staging_files(dest) == []


def test_a_collection_add_during_a_copy_is_not_lost(
    tmp_path: Path, source: tuple[Path, dict[str, str]]
) -> None:
    """Before: the add wrote into the file the copy then replaced, reported success, and its
    collection was in `index.yml` but not in the index. Now it waits for the copy and is
    refused, saying nothing was written; either way file and index agree."""
    src, env = source
    dest = tmp_path / "out" / "copy.sqlite"
    dest.parent.mkdir()
    dest_env = {**env, "INDEX_PATH": str(dest), "QMD_CONFIG_DIR": str(tmp_path / "dest-config")}
    folder = extra_folder(tmp_path)
    args = ("index", "copy", str(src), str(dest))
    with caught(env, args, lambda _pid: bool(staging_files(dest)), signal.SIGSTOP):
        adder = start(dest_env, "collection", "add", str(folder), "--name", "extra")
        # it waits for the copy's lock (before: it ended at once, "successfully")
        with contextlib.suppress(subprocess.TimeoutExpired):
            adder.wait(timeout=8)
    out, err = adder.communicate(timeout=120)
    config = tmp_path / "dest-config" / "index.yml"
    listed = config.exists() and "extra" in config.read_text(encoding="utf-8")
    indexed = documents_of(str(dest), "extra")
    assert documents_of(str(dest), "handbook") > 0  # the copy itself is complete
    if adder.returncode == 0:
        assert listed and indexed == 3, (out, err)
    else:
        assert "was replaced" in err and "nothing was written" in err, err
        assert not listed and indexed == 0
        again = qmd(dest_env, "collection", "add", str(folder), "--name", "extra")
        assert again.returncode == 0, again.stderr
        assert documents_of(str(dest), "extra") == 3


def test_a_killed_copy_leaves_files_that_doctor_names_and_tidy_or_the_next_copy_removes(
    tmp_path: Path, source: tuple[Path, dict[str, str]]
) -> None:
    src, env = source
    dest = tmp_path / "out" / "copy.sqlite"
    dest.parent.mkdir()
    dest_env = {**env, "INDEX_PATH": str(dest), "QMD_CONFIG_DIR": str(tmp_path / "dest-config")}
    args = ("index", "copy", str(src), str(dest))
    for round_ in ("tidy", "next copy"):
        with caught(env, args, lambda _pid: bool(staging_files(dest)), signal.SIGKILL):
            pass
        left = staging_files(dest)
        assert left, "the killed copy left no staging file"
        if round_ == "tidy":
            doctor = qmd(dest_env, "doctor")
            assert "Left by a copy" in doctor.stdout and left[0] in doctor.stdout, doctor.stdout
            assert "qmd index tidy" in doctor.stdout
            tidy = qmd(dest_env, "index", "tidy")
            assert tidy.returncode == 0 and "Removed" in tidy.stdout, tidy.stderr
            assert staging_files(dest) == []
            assert "Left by a copy" not in qmd(dest_env, "doctor").stdout
        else:
            done = qmd(env, *args)
            assert done.returncode == 0, done.stderr
            assert staging_files(dest) == []


def test_tidy_and_doctor_leave_a_running_copys_file_alone(
    tmp_path: Path, source: tuple[Path, dict[str, str]]
) -> None:
    src, env = source
    dest = tmp_path / "out" / "copy.sqlite"
    dest.parent.mkdir()
    dest_env = {**env, "INDEX_PATH": str(dest), "QMD_CONFIG_DIR": str(tmp_path / "dest-config")}
    args = ("index", "copy", str(src), str(dest))
    with caught(env, args, lambda _pid: bool(staging_files(dest)), signal.SIGSTOP):
        left = staging_files(dest)
        assert "Left by a copy" not in qmd(dest_env, "doctor").stdout
        assert qmd(dest_env, "index", "tidy").returncode == 0
        assert staging_files(dest) == left
    assert documents_of(str(dest), "handbook") > 0


# -- PostgreSQL -----------------------------------------------------------------------------


def lock_holder(url: str) -> str:
    """Who holds the schema's `update` lock, as its holder labelled its connection."""
    conninfo, schema = split_schema(url)
    key = f"qmd-update:{schema}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND l.classid = ((hashtext(%s)::bigint >> 32) & 4294967295)::oid "
            "AND l.objid = (hashtext(%s)::bigint & 4294967295)::oid LIMIT 1",
            (key, key),
        ).fetchone()
    return str(row[0]) if row and row[0] else ""


def schema_exists(url: str) -> bool:
    conninfo, schema = split_schema(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        return row.fetchone() is not None


@pytest.fixture
def schemas() -> Iterator[Callable[[], str]]:
    made: list[str] = []

    def fresh() -> str:
        url, schema = fresh_schema_url()
        made.append(schema)
        return url

    try:
        yield fresh
    finally:
        for schema in made:
            drop_schema(schema)


@pytest.mark.postgres
def test_two_copies_into_one_new_schema(
    source: tuple[Path, dict[str, str]], schemas: Callable[[], str]
) -> None:
    """Before: the loser of the race could drop the schema the winner was writing (a raw
    `relation "documents" does not exist`), or say only that someone writes it. Now the lock
    comes before the schema: one copy wins, the other is refused naming it, every time."""
    src, env = source
    url = schemas()
    args = ("index", "copy", str(src), url)

    def holds(pid: int) -> bool:
        return f"pid {pid} on " in lock_holder(url)

    with caught(env, args, holds, signal.SIGSTOP) as first:
        second = qmd(env, *args)
        assert second.returncode == 1, second.stdout
        assert BUSY in second.stderr and f"pid {first.pid} on " in second.stderr, second.stderr
        assert "qmd index copy" in second.stderr and "relation" not in second.stderr
    assert first.returncode == 0, first.stderr
    expected = documents_of(str(src), "handbook")
    assert documents_of(url, "handbook") == expected
    for _ in range(3):  # started together: exactly one wins, the other says why
        url = schemas()
        racers = [start(env, "index", "copy", str(src), url) for _ in range(2)]
        results = [(r.wait(timeout=300), r.stderr.read() if r.stderr else "") for r in racers]
        for racer in racers:
            racer.communicate()
        codes = sorted(code for code, _ in results)
        assert codes == [0, 1], results
        loser = next(text for code, text in results if code == 1)
        assert BUSY in loser and "relation" not in loser, loser
        assert documents_of(url, "handbook") == expected


@pytest.mark.postgres
def test_a_collection_add_during_a_postgres_copy_waits_for_it(
    tmp_path: Path, source: tuple[Path, dict[str, str]], schemas: Callable[[], str]
) -> None:
    src, env = source
    url = schemas()
    dest_env = {**env, "INDEX_PATH": url, "QMD_CONFIG_DIR": str(tmp_path / "dest-config")}
    folder = extra_folder(tmp_path)
    args = ("index", "copy", str(src), url)
    with caught(env, args, lambda pid: f"pid {pid} on " in lock_holder(url), signal.SIGSTOP):
        adder = start(dest_env, "collection", "add", str(folder), "--name", "extra")
        assert adder.stderr is not None
        line = adder.stderr.readline()
        assert "waiting" in line and "qmd index copy" in line, line
    _, err = adder.communicate(timeout=120)
    assert adder.returncode == 0, err
    assert documents_of(url, "extra") == 3
    assert documents_of(url, "handbook") == documents_of(str(src), "handbook")


@pytest.mark.postgres
def test_a_killed_postgres_copy_leaves_a_schema_doctor_names_and_tidy_removes(
    tmp_path: Path, source: tuple[Path, dict[str, str]], schemas: Callable[[], str]
) -> None:
    src, env = source
    url, elsewhere = schemas(), schemas()
    schema = split_schema(url)[1]
    other_env = {**env, "INDEX_PATH": elsewhere, "QMD_CONFIG_DIR": str(tmp_path / "other")}
    args = ("index", "copy", str(src), url)

    def writing(pid: int) -> bool:
        return f"pid {pid} on " in lock_holder(url) and schema_exists(url)

    for round_ in ("tidy", "next copy"):
        with caught(env, args, writing, signal.SIGKILL):
            pass
        assert schema_exists(url), "the killed copy left no schema"
        if round_ == "tidy":
            doctor = qmd(other_env, "doctor")
            assert "Left by a copy" in doctor.stdout and f"schema {schema}" in doctor.stdout, (
                doctor.stdout
            )
            tidy = qmd(other_env, "index", "tidy")
            assert tidy.returncode == 0 and f"Removed schema {schema}" in tidy.stdout, tidy
            assert not schema_exists(url)
        else:  # the next copy into it takes it over, and its mark goes with the commit
            done = qmd(env, *args)
            assert done.returncode == 0, done.stderr
            assert f"schema {schema}" not in qmd(other_env, "doctor").stdout
            assert documents_of(url, "handbook") == documents_of(str(src), "handbook")
