"""Crash consistency: `qmd update`, `qmd embed` (real MiniLM) and `qmd cleanup` SIGKILLed at
random points, many times, each followed by a full check of the index; and a full disk.

After every kill the index must pass `check_index`: `PRAGMA integrity_check`, the FTS5
integrity check, one FTS row per active document and none other, every document's content
present, and vectors matching chunks (each hash's `content_vectors` rows form a complete set
of `total_chunks`, each with exactly one `vectors_vec` row, and no `vectors_vec` row without
its chunk). At the end a rerun of each command completes and the index matches the folder.

Kill points are uniform over a calibrated full run of the command, so kills land at start-up,
mid-transaction and at commit alike. CI runs a small budget; the acceptance run (>= 100 kills)
is

    QMD_CRASH_SCALE=6 .venv/bin/python -m pytest -s tests/e2e/test_crash_consistency.py

and every test prints a summary line with its kill counts (docs/reliability.md has figures).
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from adapters.sqlite.driver import connect
from tests.figures import report
from tests.mcp_harness import REPO, fixture_env

SCALE = max(1, int(os.environ.get("QMD_CRASH_SCALE", "1")))
UPDATE_KILLS = 10 * SCALE
EMBED_KILLS = 5 * SCALE
CLEANUP_KILLS = 5 * SCALE
EMBED_MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"

VOCABULARY = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu index "
    "vector search memory token chunk query server client update embed cleanup crash "
    "journal commit rollback page cache lock writer reader file folder note draft"
)
WORDS = VOCABULARY.split()


# ------------------------------------------------------------------------------ the check


def check_index(db: str) -> dict[str, int]:
    """Everything a consistent index must satisfy; returns a few counts for the summary."""
    conn = connect(db)
    try:
        raw = conn.raw
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
        raw.execute("INSERT INTO documents_fts(documents_fts) VALUES('integrity-check')")
        active = {r[0] for r in raw.execute("SELECT id FROM documents WHERE active = 1")}
        fts = {r[0] for r in raw.execute("SELECT rowid FROM documents_fts")}
        assert fts == active, f"FTS rows {len(fts)} != active documents {len(active)}"
        missing = raw.execute(
            "SELECT COUNT(*) FROM documents d WHERE NOT EXISTS "
            "(SELECT 1 FROM content c WHERE c.hash = d.hash)"
        ).fetchone()[0]
        assert missing == 0, f"{missing} documents without content"
        dupes = raw.execute(
            "SELECT COUNT(*) FROM (SELECT collection, path FROM documents "
            "WHERE active = 1 GROUP BY collection, path HAVING COUNT(*) > 1)"
        ).fetchone()[0]
        assert dupes == 0
        sets = raw.execute(
            "SELECT hash, COUNT(*), MAX(total_chunks), MIN(total_chunks), MAX(seq) "
            "FROM content_vectors GROUP BY hash"
        ).fetchall()
        for hash_, count, most, least, top in sets:
            assert count == most == least == top + 1, f"partial vector set for {hash_}"
        chunks = {f"{h}_{s}" for h, s in raw.execute("SELECT hash, seq FROM content_vectors")}
        has_vec = raw.execute("SELECT 1 FROM sqlite_master WHERE name = 'vectors_vec'").fetchone()
        vec_rows: list[str] = []
        if has_vec:
            assert conn.vec_available
            vec_rows = [r[0] for r in raw.execute("SELECT hash_seq FROM vectors_vec")]
        assert len(vec_rows) == len(set(vec_rows))
        assert set(vec_rows) == chunks, (
            f"{len(set(vec_rows) - chunks)} vectors without chunk, "
            f"{len(chunks - set(vec_rows))} chunks without vector"
        )
        return {"documents": len(active), "vector_sets": len(sets), "chunks": len(chunks)}
    finally:
        conn.close()


def unembedded_active_hashes(db: str) -> int:
    conn = connect(db)
    try:
        return int(
            conn.raw.execute(
                "SELECT COUNT(DISTINCT d.hash) FROM documents d WHERE d.active = 1 AND NOT "
                "EXISTS (SELECT 1 FROM content_vectors cv WHERE cv.hash = d.hash)"
            ).fetchone()[0]
        )
    finally:
        conn.close()


def inactive_rows(db: str) -> int:
    conn = connect(db)
    try:
        return int(
            conn.raw.execute("SELECT COUNT(*) FROM documents WHERE active = 0").fetchone()[0]
        )
    finally:
        conn.close()


def indexed_paths(db: str, collection: str) -> set[str]:
    conn = connect(db)
    try:
        rows = conn.raw.execute(
            "SELECT path FROM documents WHERE collection = ? AND active = 1", (collection,)
        )
        return {r[0] for r in rows}
    finally:
        conn.close()


# ------------------------------------------------------------------------------ plumbing


@dataclass
class Killer:
    """Runs a qmd command and SIGKILLs it at a random moment of a calibrated run."""

    env: dict[str, str]
    rng: random.Random
    kills: int = 0
    finished_first: int = 0
    delays: list[float] = field(default_factory=list)

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "adapters.cli.main", *args],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def timed(self, *args: str) -> float:
        started = time.monotonic()
        done = self.run(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return time.monotonic() - started

    def kill_at_random(self, span: float, *args: str) -> bool:
        """True when the process was still running when killed."""
        delay = self.rng.uniform(0.0, span)
        process = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli.main", *args],
            env=self.env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            process.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
            self.kills += 1
            self.delays.append(delay / span if span else 0.0)
            return True
        self.finished_first += 1
        return False

    def kill_once(self, reached: Callable[[], bool], span: float, *args: str) -> bool:
        """Kill at a random moment of `span` seconds after `reached()` first holds (polled
        every 10 ms); True when the process was still running when killed."""
        process = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli.main", *args],
            env=self.env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while process.poll() is None and not reached():
            time.sleep(0.01)
        try:
            process.wait(timeout=self.rng.uniform(0.0, span))
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
            self.kills += 1
            return True
        self.finished_first += 1
        return False

    def summary(self, what: str, rounds: int, extra: str = "") -> str:
        quartiles = [0, 0, 0, 0]
        for share in self.delays:
            quartiles[min(3, int(share * 4))] += 1
        return (
            f"\n{what}: {rounds} rounds, {self.kills} SIGKILLs mid-run, "
            f"{self.finished_first} finished before their kill; kill points by quarter of a "
            f"full run {quartiles}; every index consistent{extra}"
        )


def write_doc(folder: Path, rng: random.Random, name: str, words: int) -> None:
    body = []
    for i in range(words):
        body.append(rng.choice(WORDS))
        if i % 12 == 11:
            body.append("\n")
    (folder / name).write_text(f"# {name} {rng.choice(WORDS)}\n\n" + " ".join(body) + "\n")


def mutate(folder: Path, rng: random.Random, changes: int, words: tuple[int, int]) -> None:
    """Edit, add and delete a few documents so the next command has work to do."""
    existing = sorted(p.name for p in folder.glob("*.md"))
    for _ in range(changes):
        action = rng.random()
        if action < 0.6 and existing:
            write_doc(folder, rng, rng.choice(existing), rng.randint(*words))
        elif action < 0.85 or not existing:
            write_doc(folder, rng, f"new-{rng.randrange(10**9)}.md", rng.randint(*words))
        else:
            victim = existing.pop(rng.randrange(len(existing)))
            (folder / victim).unlink()


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    env = fixture_env(tmp_path)
    env["PYTHONPATH"] = str(REPO)
    yield corpus, env


# ------------------------------------------------------------------------------ the kills


def test_update_killed_at_random_points_leaves_a_consistent_index(
    workspace: tuple[Path, dict[str, str]],
) -> None:
    corpus, env = workspace
    rng = random.Random(11)
    for i in range(400):
        write_doc(corpus, rng, f"doc-{i:03d}.md", rng.randint(50, 600))
    killer = Killer(env, rng)
    db = env["INDEX_PATH"]
    killer.timed("collection", "add", str(corpus), "--name", "c")
    mutate(corpus, rng, 150, (50, 600))
    span = killer.timed("update")
    rounds = rolled_back = 0
    while killer.kills < UPDATE_KILLS:
        rounds += 1
        assert rounds <= UPDATE_KILLS * 3, "updates keep finishing before their kill"
        if rounds % 10 == 0:  # the folder grows: keep the kill points spread over a whole run
            mutate(corpus, rng, 120, (50, 600))
            span = killer.timed("update")
        mutate(corpus, rng, 120, (50, 600))
        if killer.kill_at_random(span, "update"):
            on_disk = {p.name for p in corpus.glob("*.md")}
            rolled_back += indexed_paths(db, "c") != on_disk
        check_index(db)
    done = killer.run("update")
    assert done.returncode == 0, done.stderr
    counts = check_index(db)
    on_disk = {p.name for p in corpus.glob("*.md")}
    assert indexed_paths(db, "c") == on_disk
    extra = (
        f"; {rolled_back} kills came before the commit (index left as before); "
        f"after the rerun {counts['documents']} documents match the folder"
    )
    report(killer.summary("update", rounds, extra))


@pytest.mark.models
def test_embed_killed_at_random_points_leaves_complete_vector_sets(
    workspace: tuple[Path, dict[str, str]],
) -> None:
    if not EMBED_MODEL.is_file():
        pytest.fail(f"{EMBED_MODEL.name} missing; run: python scripts/prepare_models.py")
    corpus, env = workspace
    env["QMD_EMBED_MODEL"] = str(EMBED_MODEL)
    rng = random.Random(23)
    for i in range(12):
        write_doc(corpus, rng, f"doc-{i:03d}.md", rng.randint(100, 700))
    killer = Killer(env, rng)
    db = env["INDEX_PATH"]
    killer.timed("collection", "add", str(corpus), "--name", "c")
    killer.timed("embed")
    # Every round re-embeds everything (-f), so each kill point falls inside a whole run;
    # two documents per batch, so vectors are stored all along the run, not only at its end.
    embed = ("embed", "-f", "--max-docs-per-batch", "2")
    span = killer.timed(*embed)
    rounds = partial = 0
    while killer.kills < EMBED_KILLS:
        rounds += 1
        assert rounds <= EMBED_KILLS * 3, "embeds keep finishing before their kill"
        mutate(corpus, rng, 3, (100, 700))
        killer.timed("update")
        if killer.kill_at_random(span, *embed):
            left = unembedded_active_hashes(db)
            partial += 0 < left < len(indexed_paths(db, "c"))
        check_index(db)
    done = killer.run("embed")
    assert done.returncode == 0, done.stderr
    counts = check_index(db)
    status = killer.run("status")
    assert "need embedding" not in status.stdout, status.stdout
    assert unembedded_active_hashes(db) == 0
    report(
        killer.summary(
            "embed (MiniLM)",
            rounds,
            f"; {partial} kills left the backlog part-embedded; "
            f"the rerun embedded all, {counts['chunks']} chunks",
        )
    )


@pytest.mark.models
def test_cleanup_killed_at_random_points_leaves_a_consistent_index(
    workspace: tuple[Path, dict[str, str]],
) -> None:
    """Cleanup rewrites the file (VACUUM) after deleting orphans: kills land in both."""
    if not EMBED_MODEL.is_file():
        pytest.fail(f"{EMBED_MODEL.name} missing; run: python scripts/prepare_models.py")
    corpus, env = workspace
    env["QMD_EMBED_MODEL"] = str(EMBED_MODEL)
    rng = random.Random(37)
    embedded, plain = corpus / "embedded", corpus / "plain"
    embedded.mkdir()
    plain.mkdir()
    for i in range(12):
        write_doc(embedded, rng, f"v-{i:02d}.md", rng.randint(50, 300))
    for i in range(300):
        write_doc(plain, rng, f"doc-{i:03d}.md", rng.randint(50, 400))
    killer = Killer(env, rng)
    db = env["INDEX_PATH"]
    # only the small collection gets vectors (a model run per round would dominate the time);
    # its edits leave orphaned vectors, the big one's inactive rows and a file worth vacuuming
    killer.timed("collection", "add", str(embedded), "--name", "v")
    killer.timed("embed")
    killer.timed("collection", "add", str(plain), "--name", "c")
    rounds = deleted = aimed = 0
    span = 0.0
    while killer.kills < CLEANUP_KILLS:
        rounds += 1
        assert rounds <= CLEANUP_KILLS * 3, "cleanups keep finishing before their kill"
        mutate(embedded, rng, 2, (50, 300))
        mutate(plain, rng, 40, (50, 400))
        killer.timed("update")
        if rounds == 1:
            snapshot = Path(db + ".calibrate")
            shutil.copy(db, snapshot)
            span = killer.timed("cleanup")
            shutil.copy(snapshot, db)
            snapshot.unlink()
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(db + suffix)
        if rounds % 3 == 0:
            # aimed at the end of the run (FTS optimize, VACUUM), which uniform kill points
            # rarely reach: most of a cleanup's wall time is start-up and the deletes
            if killer.kill_once(lambda: inactive_rows(db) == 0, span / 8, "cleanup"):
                deleted += 1
                aimed += 1
        elif killer.kill_at_random(span, "cleanup"):
            deleted += inactive_rows(db) == 0
        check_index(db)
    done = killer.run("cleanup")
    assert done.returncode == 0, done.stderr
    check_index(db)
    dry = killer.run("cleanup", "--dry-run")
    assert "No orphaned embeddings to remove" in dry.stdout, dry.stdout
    assert killer.run("update").returncode == 0
    assert indexed_paths(db, "c") == {p.name for p in plain.glob("*.md")}
    assert indexed_paths(db, "v") == {p.name for p in embedded.glob("*.md")}
    extra = (
        f"; {deleted} kills came after its deletes had committed (in FTS optimize, VACUUM "
        f"or exit; {aimed} of them aimed there), {killer.kills - deleted} before"
    )
    report(killer.summary("cleanup", rounds, extra))


# ------------------------------------------------------------------------------ disk full


@contextlib.contextmanager
def small_filesystem(where: Path, size_kib: int) -> Iterator[tuple[Path, str]]:
    """A real size-limited file system: a tmpfs mounted by the test (root), else the
    process file-size limit (RLIMIT_FSIZE) applied to the qmd child, said so in the output."""
    where.mkdir()
    if os.geteuid() == 0 and os.environ.get("QMD_TEST_NO_MOUNT") != "1":
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            check=False,
        )
        if mounted.returncode == 0:
            try:
                yield where, f"tmpfs of {size_kib} KiB"
            finally:
                subprocess.run(["umount", "-l", str(where)], check=False)
            return
    yield where, "RLIMIT_FSIZE (mounting a tmpfs was not possible)"


def test_full_disk_gives_a_clear_error_and_an_index_that_still_opens(
    workspace: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    corpus, env = workspace
    rng = random.Random(5)
    for i in range(20):
        write_doc(corpus, rng, f"small-{i:02d}.md", 80)
    big = tmp_path / "big"
    big.mkdir()
    for i in range(400):
        write_doc(big, rng, f"big-{i:03d}.md", 800)
    with small_filesystem(tmp_path / "small", 1536) as (mount, how):
        env["INDEX_PATH"] = str(mount / "index.sqlite")
        limit = 1536 * 1024

        def limited() -> None:  # reads `limit` when called: raised below to make room
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        def qmd(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "adapters.cli.main", *args],
                env=env,
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
                preexec_fn=None if how.startswith("tmpfs") else limited,
            )

        first = qmd("collection", "add", str(corpus), "--name", "small")
        assert first.returncode == 0, first.stderr
        full = qmd("collection", "add", str(big), "--name", "big")
        assert full.returncode != 0, full.stdout
        assert "Traceback" not in full.stderr
        assert "full" in full.stderr.lower() and "index.sqlite" in full.stderr, full.stderr
        # REQ-INDEX-DISKFULL-001: what was kept, said as it is (issue 33: "the command was rolled
        # back" came after the collection had been registered): it is, its files' indexing is not
        assert "command was rolled back" not in full.stderr, full.stderr
        assert "Kept: collection 'big' is registered (in index.yml and the index) with 0 of " in (
            full.stderr
        ), full.stderr
        assert "qmd update" in full.stderr
        listed = qmd("collection", "list")
        assert "big (qmd://big/)" in listed.stdout and "small (qmd://small/)" in listed.stdout
        status = qmd("status")
        assert status.returncode == 0, status.stderr
        assert "Total:    20 files indexed" in status.stdout, status.stdout
        check_index(env["INDEX_PATH"])
        search = qmd("search", "alpha", "-c", "small", "--json")
        assert search.returncode == 0, search.stderr
        # with room again, the same command completes
        if how.startswith("tmpfs"):
            grown = ["mount", "-o", "remount,size=65536k", str(mount)]
            assert subprocess.run(grown, check=False).returncode == 0
        else:
            limit = 1 << 40
        again = qmd("update")
        assert again.returncode == 0, again.stderr
        assert check_index(env["INDEX_PATH"])["documents"] == 420
        report(f"\ndisk full ({how}): {full.stderr.strip().splitlines()[0]!r}; index opens")
