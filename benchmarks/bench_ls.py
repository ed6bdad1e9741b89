"""`qmd ls COLLECTION` on a large folder: ours (which also scans the folder to name the files it
does not list, REQ-INDEX-LS-SKIPPED-001) against the original QMD 2.8.3 (which only lists).

    nice -n 10 .venv/bin/python -m benchmarks.bench_ls                  # 10,000 and 50,000 files
    nice -n 10 .venv/bin/python -m benchmarks.bench_ls --docs 500 --rounds 1 --ours-only  # smoke
    ... --baseline DIR     # also ours from another checkout (e.g. `git archive` of an older
                           # commit) on the same folder: before and after a change, same load

For each size:
1. Generate the synthetic corpus (benchmarks/corpus.py), plus `--odd` files `qmd update`
   skips: binary files and links (the original indexes the binary ones as text).
2. Index it once with each implementation (`qmd collection add`, BM25 only: no model is
   loaded or embedded), each with its own state; then add `--odd` new files no update has seen
   (ours names them "not indexed yet", reading each).
3. One untimed `qmd ls bench` each (bytecode and page caches), then `--rounds` timed ones, the
   order alternating per round, every run a new process. Wall clock and CPU time (user + sys
   of the process tree, `wait4`) are printed with their medians, the ratio ours/original, and
   the 1-minute load average beside them: the machine may be shared, and CPU time is the
   steadier figure there.

Target: ours at most `TARGET_RATIO` times the original's CPU (the scan must not make `ls`
much dearer than a listing).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import corpus as corpus_mod
from benchmarks.harness import (
    BenchError,
    Implementation,
    Timed,
    load_average,
    machine,
    original,
    ours,
    run_main,
)

COLLECTION = "bench"
TARGET_RATIO = 1.5
DEFAULT_SIZES = (10_000, 50_000)


@dataclass
class Runs:
    label: str
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.label:<8} wall {statistics.median(self.wall):6.2f} s "
            f"(min {min(self.wall):.2f})   CPU {statistics.median(self.cpu):6.2f} s "
            f"(min {min(self.cpu):.2f})"
        )


def _odd_files(root: Path, count: int) -> None:
    """Files `qmd update` skips: binary `.md` files (NUL bytes) and links to an indexed file."""
    odd = root / "odd"
    odd.mkdir(parents=True, exist_ok=True)
    target = next(root.rglob("doc-*.md"))
    for number in range(count):
        if number % 2:
            (odd / f"link-{number:04d}.md").symlink_to(target)
        else:
            (odd / f"binary-{number:04d}.md").write_bytes(b"\x00\x01binary\x00" * 64)


def _new_files(root: Path, count: int) -> None:
    """Readable files written after the index was built: no update has seen them."""
    fresh = root / "fresh"
    fresh.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        (fresh / f"new-{number:04d}.md").write_text(f"# New {number}\n\nnot yet indexed\n")


def _ls(impl: Implementation) -> Timed:
    """One `qmd ls bench`, which must list something."""
    timed = impl.run_timed("ls", COLLECTION)
    if timed.rc != 0 or not timed.stdout.strip():
        raise BenchError(f"{impl.label}: `qmd ls {COLLECTION}` exited {timed.rc}: {timed.tail}")
    return timed


def run_size(
    work: Path, docs: int, odd: int, rounds: int, ours_only: bool, baseline: Path | None
) -> float | None:
    """Time both on one folder of `docs` files; the CPU ratio ours/original (None: ours only)."""
    root = work / "corpus"
    corpus_mod.generate(root, docs, queries=1)
    _odd_files(root, odd)
    impls = [ours(work / "ours")]
    if baseline is not None:
        # the same `qmd` script with another checkout's code first on the path
        env = {"PYTHONPATH": str(baseline.resolve())}
        impls.append(dataclasses.replace(ours(work / "baseline", env), label="baseline"))
    if not ours_only:
        impls.append(original(work / "original"))
    for impl in impls:
        timed = impl.run_timed("collection", "add", str(root), "--name", COLLECTION)
        if timed.rc != 0:
            raise BenchError(f"{impl.label}: `qmd collection add` exited {timed.rc}: {timed.tail}")
        print(f"  indexed by {impl.label}: {timed.wall_s:.1f} s wall, {timed.cpu_s:.1f} s CPU")
    _new_files(root, odd)
    said: dict[str, str] = {}
    for impl in impls:
        first = _ls(impl)  # untimed: bytecode and page caches
        said[impl.label] = first.stdout + first.tail
        print(
            f"  {impl.label}: `qmd ls {COLLECTION}` lists {first.stdout.count(chr(10)):,} lines "
            f"on stdout; stderr ends: {first.tail.splitlines()[-1] if first.tail else '(nothing)'}"
        )
    if "baseline" in said and said["baseline"] != said["ours"]:
        raise BenchError("ours and the baseline do not say the same (stdout, stderr's tail)")
    runs = {impl.label: Runs(impl.label) for impl in impls}
    loads = [load_average()]
    for number in range(rounds):
        for impl in impls if number % 2 == 0 else impls[::-1]:
            timed = _ls(impl)
            runs[impl.label].wall.append(timed.wall_s)
            runs[impl.label].cpu.append(timed.cpu_s)
    loads.append(load_average())
    load = f"1-minute load {loads[0]:.1f} at start, {loads[-1]:.1f} at end"
    print(f"  median of {rounds} cold `qmd ls {COLLECTION}` each; {load}")
    for impl in impls:
        print(f"    {runs[impl.label].line()}   load {loads[-1]:.1f}")
    if "baseline" in runs:
        cpu = statistics.median(runs["ours"].cpu) / statistics.median(runs["baseline"].cpu)
        print(f"    ratio ours/baseline: CPU {cpu:.2f}   load {loads[-1]:.1f}")
    if ours_only:
        return None
    mine, theirs = runs["ours"], runs["original"]
    cpu_ratio = statistics.median(mine.cpu) / statistics.median(theirs.cpu)
    wall_ratio = statistics.median(mine.wall) / statistics.median(theirs.wall)
    verdict = "PASS" if cpu_ratio <= TARGET_RATIO else "FAIL"
    print(
        f"    ratio ours/original: CPU {cpu_ratio:.2f} (target <= {TARGET_RATIO}: {verdict}), "
        f"wall {wall_ratio:.2f}   load {loads[-1]:.1f}"
    )
    return cpu_ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--odd", type=int, default=100, help="unindexable files, and new ones")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--baseline", type=Path, help="a checkout whose `qmd` is timed too")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    options = parser.parse_args(argv)
    print(f"`qmd ls` on a large collection; {machine()}")
    passed = True
    for docs in options.docs:
        work = Path(tempfile.mkdtemp(prefix=f"qmd-bench-ls-{docs}-"))
        try:
            print(
                f"{docs:,} documents + {options.odd} binary files and links + {options.odd} "
                f"new files (pid {os.getpid()})"
            )
            ratio = run_size(
                work, docs, options.odd, options.rounds, options.ours_only, options.baseline
            )
            passed = passed and (ratio is None or ratio <= TARGET_RATIO)
        finally:
            if options.keep:
                print(f"  kept {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
    return 0 if passed else 1


if __name__ == "__main__":
    run_main(main)
