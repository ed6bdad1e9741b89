"""Which x86-64 instructions a binary uses beyond the x86-64-v3 baseline (AVX2), read from its
disassembly (`objdump -d`, binutils).

The PostgreSQL server and its pgvector extension must run on any x86-64 with AVX2
(docs/decisions/0046). A build made with `-march=native` on an AVX-512 machine does not: it
dies with SIGILL on its first vector operation elsewhere. Both projects also carry a few
functions that use AVX-512 *on purpose*, selected at run time after a CPUID check (PostgreSQL's
`pg_popcount_avx512`, `pg_comp_crc32c_avx512`; pgvector's `BitHammingDistanceAvx512Popcount`):
those are allowed, by name, and only when the binary contains the `cpuid` that guards them.

    python -m tooling.isa FILE...              report; exit 1 when a file goes beyond v3
    python -m tooling.isa --this-cpu FILE...   exit 1 only when THIS machine's CPU lacks what a
                                               file needs (the start-up guard of postgres.sh)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# Functions chosen at run time after a CPUID check, in PostgreSQL and in pgvector: both name
# such a variant after the instruction set it needs.
DISPATCHED = re.compile(r"avx512", re.IGNORECASE)

# Instruction-set extensions outside x86-64-v3 that a compiler emits for some -march, by
# mnemonic (AVX-512 itself is recognised by its encoding and registers, below).
_BEYOND_V3 = {
    "AVX-VNNI": re.compile(r"^(\{vex\}\s*)?vpdp(bu|ws)sds?\s"),
    "GFNI": re.compile(r"^v?gf2p8"),
    "VAES": re.compile(r"^vaes(enc|dec)(last)?\s.*%ymm"),
    "VPCLMULQDQ": re.compile(r"^vpclmul\w*\s.*%ymm"),
    "SHA": re.compile(r"^sha(1|256)\w*\s"),
    "ADX": re.compile(r"^ad[co]x\s"),
    "AMX": re.compile(r"^(tdp|tileload|tilestore|tilezero|ldtilecfg|sttilecfg)\w*"),
}
# EVEX (62 as the opcode's first byte; BOUND, its only other meaning, is invalid in 64-bit
# mode), a zmm register or an opmask register: AVX-512.
_EVEX = re.compile(r"^(?:(?:f0|f2|f3|2e|36|3e|26|64|65|66|67) )*62 ")
_AVX512_OPERANDS = re.compile(r"%zmm\d|%k[0-7]\b")
_FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")


@dataclass
class Report:
    path: str
    # instruction set -> function -> count, outside the run-time-dispatched functions
    beyond: dict[str, Counter[str]] = field(default_factory=dict)
    dispatched: Counter[str] = field(default_factory=Counter)  # AVX-512 in allowed functions
    has_cpuid: bool = False
    example: dict[str, str] = field(default_factory=dict)

    @property
    def portable(self) -> bool:
        return not self.beyond and (not self.dispatched or self.has_cpuid)

    def needs(self) -> list[str]:
        return sorted(self.beyond)

    def describe(self) -> str:
        if self.portable:
            extra = ""
            if self.dispatched:
                names = ", ".join(sorted(self.dispatched))
                extra = f" (AVX-512 only in functions chosen after a CPUID check: {names})"
            return f"{self.path}: x86-64-v3 at most{extra}"
        lines = [f"{self.path}: uses instructions beyond x86-64-v3:"]
        for isa, functions in sorted(self.beyond.items()):
            total = sum(functions.values())
            top = ", ".join(name for name, _ in functions.most_common(5))
            lines.append(
                f"  {isa}: {total} instruction(s) in {len(functions)} function(s), e.g. {top}"
                f" ({self.example[isa]})"
            )
        if self.dispatched and not self.has_cpuid:
            lines.append("  AVX-512 in dispatched functions, but no cpuid guard in the binary")
        return "\n".join(lines)


def classify(raw: str, text: str) -> str | None:
    """The instruction set beyond v3 that one disassembled instruction needs, or None."""
    if _EVEX.match(raw) or _AVX512_OPERANDS.search(text):
        return "AVX-512"
    for isa, pattern in _BEYOND_V3.items():
        if pattern.search(text):
            return isa
    return None


def scan_disassembly(path: str, lines: Iterable[str]) -> Report:
    """Read `objdump -d -w` output."""
    report = Report(path)
    function = "?"
    for line in lines:
        found = _FUNCTION.match(line)
        if found:
            function = found.group(1)
            continue
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        raw, text = parts[1].strip(), parts[2].strip()
        if text.startswith("cpuid"):
            report.has_cpuid = True
        isa = classify(raw, text)
        if isa is None:
            continue
        if isa == "AVX-512" and DISPATCHED.search(function):
            report.dispatched[function] += 1
            continue
        report.beyond.setdefault(isa, Counter())[function] += 1
        report.example.setdefault(isa, f"{function}: {text}")
    return report


def scan(path: str) -> Report:
    objdump = shutil.which("objdump")
    if objdump is None:
        raise SystemExit("objdump (Debian package binutils) is needed to read the binary")
    done = subprocess.run([objdump, "-d", "-w", path], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"objdump failed on {path}: {done.stderr.strip()}")
    return scan_disassembly(path, done.stdout.splitlines())


# /proc/cpuinfo flag each instruction set needs
CPU_FLAGS = {
    "AVX-512": "avx512f",
    "AVX-VNNI": "avx_vnni",
    "GFNI": "gfni",
    "VAES": "vaes",
    "VPCLMULQDQ": "vpclmulqdq",
    "SHA": "sha_ni",
    "ADX": "adx",
    "AMX": "amx_tile",
}
V3_FLAGS = ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe")


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    with open(cpuinfo, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("flags"):
                return set(line.partition(":")[2].split())
    return set()


def missing_on(report: Report, flags: set[str]) -> list[str]:
    """What `report`'s binary needs that a CPU with `flags` lacks (the v3 baseline included)."""
    missing = [f"x86-64-v3 ({flag})" for flag in V3_FLAGS if flag not in flags]
    missing += [isa for isa in report.needs() if CPU_FLAGS[isa] not in flags]
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tooling.isa", description=__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--this-cpu", action="store_true")
    args = parser.parse_args(argv)
    failed = False
    # QMD_CPUINFO: another machine's /proc/cpuinfo, to try the refusal (tests)
    flags = cpu_flags(os.environ.get("QMD_CPUINFO", "/proc/cpuinfo")) if args.this_cpu else set()
    for path in args.files:
        report = scan(path)
        if not args.this_cpu:
            print(report.describe())
            failed = failed or not report.portable
            continue
        missing = missing_on(report, flags)
        if missing:
            print(
                f"{path} needs {', '.join(missing)}, which this CPU does not have: it would stop"
                " with SIGILL (illegal instruction). Install a build made for x86-64-v3"
                " (scripts/setup.sh installs one; docs/decisions/0046).",
                file=sys.stderr,
            )
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
