"""CPU time of a `qmd update` that changes nothing: ours against the original QMD 2.8.3, and
ours on PostgreSQL against ours on SQLite.

    .venv/bin/python -m benchmarks.bench_update                      # 7,000 docs, 5 rounds
    .venv/bin/python -m benchmarks.bench_update --docs 200 --rounds 1   # smoke size
    .venv/bin/python -m benchmarks.bench_update --docs 8000 --postgres --ours-only

1. Generate the synthetic corpus (benchmarks/corpus.py) in a temporary folder.
2. Index it once with each implementation (`qmd collection add`), each with its own state.
3. Wait until every file's modification time is more than two seconds old (a file changed
   within two seconds of a scan is always re-read, docs/spec/index.md REQ-INDEX-NOOP-001), then
   run `qmd update` `--rounds` times per implementation, alternating, and measure each run's CPU
   time (user + sys of the process tree, from `wait4`). The machine may be shared, so CPU
   time is the figure to use; wall clock is printed beside it.
4. With `--touch N`, also time an update after N files got new content (same size, so only
   the modification time tells them apart), to show that changed files are still found.

It prints the medians, the ratio ours/original and PASS/FAIL for the target: a no-op update
costs at most half the original's CPU. With `--postgres` our `qmd` also runs on a fresh schema
of the local PostgreSQL (scripts/postgres.sh, or `--pg-url`), and the ratio of its wall-clock
median to SQLite's is printed against issue 36's target (at most 1.5x): the server's work is
not in the client's CPU time, so wall clock is the fair figure there, printed with the load
average of the moment.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import corpus as corpus_mod
from benchmarks.harness import (
    REPO,
    BenchError,
    Implementation,
    load_average,
    machine,
    original,
    ours,
    run_main,
)

COLLECTION = "bench"
TARGET_RATIO = 0.5
PG_TARGET_RATIO = 1.5  # issue 36: a no-op update on PostgreSQL within 1.5x of SQLite's wall time
PG_LABEL = "postgres"


@dataclass
class Runs:
    label: str
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    index_cpu: float = 0.0

    def line(self) -> str:
        return (
            f"  {self.label:<9} CPU median {statistics.median(self.cpu):6.2f} s "
            f"(runs {', '.join(f'{c:.2f}' for c in self.cpu)}), wall median "
            f"{statistics.median(self.wall):6.2f} s"
        )


def _pg_server(given: str | None) -> str:
    if given:
        return given
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "postgres.sh"), "start"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"scripts/postgres.sh start failed: {done.stderr.strip()[-400:]}")
    return done.stdout.strip().splitlines()[-1]


def _on_postgres(home: Path, server: str) -> tuple[Implementation, str]:
    """Our `qmd` on a schema of its own (the caller drops it): (implementation, schema)."""
    schema = "bench_update_" + uuid.uuid4().hex[:12]
    sqlite = ours(home)
    command = (*sqlite.command, "--index-url", f"{server}?schema={schema}")
    return dataclasses.replace(sqlite, label=PG_LABEL, command=command), schema


def _drop_schema(server: str, schema: str) -> None:
    import psycopg  # the driver is needed only with --postgres

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _fresh_index(impl: Implementation, root: Path) -> float:
    for name in ("config", ".cache", ".config"):
        shutil.rmtree(impl.home / name, ignore_errors=True)
    for stale in impl.index_path.parent.glob(impl.index_path.name + "*"):
        stale.unlink()
    timed = impl.run_timed("collection", "add", str(root), "--name", COLLECTION)
    if timed.rc != 0:
        raise BenchError(f"{impl.label}: `qmd collection add` exited {timed.rc}: {timed.tail}")
    return timed.cpu_s


def _update(impl: Implementation, runs: Runs) -> str:
    timed = impl.run_timed("update")
    if timed.rc != 0:
        raise BenchError(f"{impl.label}: `qmd update` exited {timed.rc}: {timed.tail}")
    runs.cpu.append(timed.cpu_s)
    runs.wall.append(timed.wall_s)
    return timed.stdout


def _rewrite_same_size(root: Path, files: list[str], count: int) -> None:
    """New content of the same length in `count` files (a letter changed near the end)."""
    for relative in files[:count]:
        path = root / relative
        data = bytearray(path.read_bytes())
        at = len(data) - 3
        data[at] = ord("x") if data[at] != ord("x") else ord("y")
        path.write_bytes(bytes(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=7000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--touch", type=int, default=0, help="files changed before a last run")
    parser.add_argument("--seed", type=int, default=corpus_mod.DEFAULT_SEED)
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--postgres", action="store_true", help="also ours on PostgreSQL")
    parser.add_argument("--pg-url", help="the PostgreSQL server (default: scripts/postgres.sh)")
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="qmd-bench-update-"))
    server, schema = "", ""
    try:
        print(f"no-op `qmd update`, {options.docs:,} documents; {machine()}")
        root = work / "corpus"
        corpus = corpus_mod.generate(root, options.docs, options.seed, queries=0)
        impls = [ours(work / "ours")]
        if not options.ours_only:
            impls.append(original(work / "original"))
        if options.postgres:
            server = _pg_server(options.pg_url)
            on_pg, schema = _on_postgres(work / "ours-pg", server)
            impls.append(on_pg)
        runs = {impl.label: Runs(impl.label) for impl in impls}
        for impl in impls:
            runs[impl.label].index_cpu = _fresh_index(impl, root)
            print(f"  indexed by {impl.label}: {runs[impl.label].index_cpu:.2f} s CPU")
        newest = max(os.stat(root / f).st_mtime for f in corpus.files)
        time.sleep(max(0.0, newest + 2.5 - time.time()))
        for impl in impls:  # one untimed update each: settles whatever the first add left
            _update(impl, Runs(impl.label))
        for _ in range(options.rounds):
            for impl in impls:
                _update(impl, runs[impl.label])
        print("no-op update (CPU = user + sys of the process tree):")
        for impl in impls:
            print(runs[impl.label].line())
        if not options.ours_only:
            ratio = statistics.median(runs["ours"].cpu) / statistics.median(runs["original"].cpu)
            verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
            print(f"  ratio ours/original CPU: {ratio:.2f} (target <= {TARGET_RATIO}: {verdict})")
        if options.postgres:
            ratio = statistics.median(runs[PG_LABEL].wall) / statistics.median(runs["ours"].wall)
            verdict = "PASS" if ratio <= PG_TARGET_RATIO else "FAIL"
            print(
                f"  ratio postgres/sqlite wall: {ratio:.2f} (target <= {PG_TARGET_RATIO}: "
                f"{verdict}); load average now {load_average():.1f}"
            )
        if options.touch:
            _rewrite_same_size(root, corpus.files, options.touch)
            print(f"after rewriting {options.touch} file(s) in place (same sizes):")
            for impl in impls:
                changed = Runs(impl.label)
                output = _update(impl, changed)
                counted = [line.strip() for line in output.splitlines() if "unchanged" in line]
                summary = "; ".join(counted) or output.strip()[-160:]
                print(f"  {impl.label:<9} CPU {changed.cpu[0]:6.2f} s   {summary}")
    finally:
        if schema:
            _drop_schema(server, schema)
        if options.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    run_main(main)
