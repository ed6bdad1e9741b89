"""Cold CLI commands: `qmd search WORD` and `qmd status`, ours against the original QMD 2.8.3.

    .venv/bin/python -m benchmarks.bench_cli_start                    # 5,000 docs, 15 rounds
    .venv/bin/python -m benchmarks.bench_cli_start --docs 200 --rounds 3 --ours-only  # smoke

1. Generate the synthetic corpus (benchmarks/corpus.py) and index it once with each
   implementation (`qmd collection add`), each with its own state.
2. Run one untimed `search` and `status` of each (bytecode caches, the page cache).
3. `--rounds` times: each command once per implementation, the order alternating per round,
   every run a new process (an agent calling the CLI through a shell pays exactly this).
   The machine may be shared: the figure is the ratio of the medians of the wall clocks.
4. Ours once more, in-process under a counting wrapper with `python -X importtime`: the
   modules a `search` imports (all, and the project's own), the time those imports take,
   and the SQL statements it runs (`QMD_SQL_TRACE`, statements SQLite runs inside FTS5 on
   our behalf left out).

It prints the medians, the ratios and PASS/FAIL against the targets: each command at most
half the original's wall time, at most 10 SQL statements for `search`. The 1-minute load
average is printed beside the figures (at the start and the end of the timed rounds); at
`LOAD_LIMIT` or above the ratios are marked as not valid: a loaded machine slows the heavier
process more, which flatters the lighter one, so re-run on a quiet machine.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import corpus as corpus_mod
from benchmarks.harness import (
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
SQL_BUDGET = 10
LOAD_LIMIT = 1.5  # a 1-minute load average at or above it makes the ratios unreliable

# Runs our `main` and writes how many modules it left imported to stderr's last line.
_COUNTING = (
    "import sys\n"
    "from adapters.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "own = [m for m in sys.modules if m.split('.')[0] in ('adapters', 'domain')]\n"
    "sys.stdout.flush()\n"
    "sys.stderr.write(f'\\nMODULES {len(sys.modules)} {len(own)}\\n')\n"
    "sys.exit(code)\n"
)


@dataclass
class Walls:
    label: str
    runs: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


def _index(impl: Implementation, root: Path) -> float:
    timed = impl.run_timed("collection", "add", str(root), "--name", COLLECTION)
    if timed.rc != 0:
        raise BenchError(f"{impl.label}: `qmd collection add` exited {timed.rc}: {timed.tail}")
    return timed.wall_s


def _timed(impl: Implementation, args: tuple[str, ...]) -> float:
    timed = impl.run_timed(*args)
    if timed.rc != 0 or not timed.stdout.strip():
        raise BenchError(f"{impl.label}: `qmd {' '.join(args)}` exited {timed.rc}: {timed.tail}")
    return timed.wall_s


@dataclass
class Counted:
    """One in-process run of ours under the counting wrapper."""

    modules: int
    own_modules: int
    import_ms: float  # the imports' own clock (`-X importtime`), top-level imports summed
    statements: list[str]


def _import_ms(stderr: str) -> float:
    """The summed cumulative time of the top-level imports `-X importtime` reported."""
    total_us = 0
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        if name.startswith(" ") and not name.startswith("  ") and cumulative.strip().isdigit():
            total_us += int(cumulative)  # one space: a top-level import (nested ones indent)
    return total_us / 1000


def count_ours(impl: Implementation, args: tuple[str, ...], runs: int = 5) -> Counted:
    """Modules, import time (the least of `runs` runs: a shared machine only adds to it) and
    SQL statements of an in-process run of ours."""
    trace = impl.home / "sql-trace.txt"
    env = dict(impl.env, QMD_SQL_TRACE=str(trace))
    counted: Counted | None = None
    for _ in range(runs):
        trace.unlink(missing_ok=True)
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", _COUNTING, *args],
            env=env,
            cwd=impl.home,
            capture_output=True,
            text=True,
            timeout=120,
        )
        last = done.stderr.strip().splitlines()[-1:] or [""]
        if done.returncode != 0 or not last[0].startswith("MODULES "):
            failed = done.stderr[-800:]
            raise BenchError(f"counting run of `qmd {' '.join(args)}` failed: {failed}")
        _, total, own = last[0].split()
        lines = trace.read_text().splitlines() if trace.exists() else []
        # FTS5 reports the statements it prepares for itself with a leading `-- `
        statements = [line for line in lines if not line.startswith("-- ")]
        ms = _import_ms(done.stderr)
        if counted is None or ms < counted.import_ms:
            counted = Counted(int(total), int(own), ms, statements)
    assert counted is not None
    return counted


def _load_note(loads: list[float]) -> str:
    worst = max(loads)
    note = f"1-minute load {loads[0]:.1f} at start, {loads[-1]:.1f} at end"
    if worst >= LOAD_LIMIT:
        note += (
            f"  WARNING: load {worst:.1f} >= {LOAD_LIMIT}: the ratios are not valid "
            "(a loaded machine flatters the lighter process); re-run on a quiet machine"
        )
    return note


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seed", type=int, default=corpus_mod.DEFAULT_SEED)
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--show-sql", action="store_true", help="print our search's statements")
    options = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="qmd-bench-cli-"))
    try:
        print(f"cold CLI start, {options.docs:,} documents; {machine()}")
        root = work / "corpus"
        corpus = corpus_mod.generate(root, options.docs, options.seed, queries=1)
        word = corpus.queries[0].split()[0]
        impls = [ours(work / "ours")]
        if not options.ours_only:
            impls.append(original(work / "original"))
        for impl in impls:
            print(f"  indexed by {impl.label}: {_index(impl, root):.2f} s")
        commands = {"search": ("search", word), "status": ("status",)}
        walls = {(c, i.label): Walls(i.label) for c in commands for i in impls}
        for args in commands.values():
            for impl in impls:
                _timed(impl, args)  # untimed: bytecode and page caches
        loads = [load_average()]
        for round_number in range(options.rounds):
            order = impls if round_number % 2 == 0 else impls[::-1]
            for name, args in commands.items():
                for impl in order:
                    walls[(name, impl.label)].runs.append(_timed(impl, args))
        loads.append(load_average())
        print(f"wall clock, median of {options.rounds} cold processes each (`search {word}`):")
        print(f"  {_load_note(loads)}")
        passed = True
        for name in commands:
            figures = [walls[(name, impl.label)] for impl in impls]
            line = "   ".join(f"{w.label} {w.median * 1000:7.1f} ms" for w in figures)
            if len(figures) == 2:
                ratio = figures[0].median / figures[1].median
                verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
                passed = passed and ratio <= TARGET_RATIO
                line += f"   ratio {ratio:.2f} (target <= {TARGET_RATIO}: {verdict})"
            print(f"  {name:<7} {line}   load {loads[-1]:.1f}")
        counted = count_ours(impls[0], commands["search"])
        statements = counted.statements
        sql_ok = len(statements) <= SQL_BUDGET
        passed = passed and sql_ok
        print(
            f"ours, `qmd search {word}`: {counted.modules} modules imported "
            f"({counted.own_modules} of the project) in {counted.import_ms:.1f} ms "
            f"(-X importtime, least of 5 runs), load {load_average():.1f}"
        )
        print(
            f"ours, `qmd search {word}`: {len(statements)} SQL statements "
            f"(target <= {SQL_BUDGET}: {'PASS' if sql_ok else 'FAIL'})"
        )
        if options.show_sql:
            for statement in statements:
                print(f"    {statement[:140]}")
    finally:
        if options.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if passed else 1


if __name__ == "__main__":
    run_main(main)
