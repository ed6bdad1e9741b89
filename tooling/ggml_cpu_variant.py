"""The ggml CPU build the original QMD runs on this machine, as CMake flags for ours.

The original's node-llama-cpp ships one ggml CPU library per x86 feature level
(`GGML_CPU_ALL_VARIANTS`) and loads the one whose score is highest among those this CPU can run
(ggml's `ggml_backend_cpu_x86_score`: a variant needs every feature it was built with; each
feature adds its own power of two). Built with the same flags (and the same compiler major
version, ADR 0058), llama-cpp-python's ggml computes the original's EmbeddingGemma vectors bit
for bit; built for another level it does not.

    python -m tooling.ggml_cpu_variant           # the variant's name, e.g. icelake
    python -m tooling.ggml_cpu_variant --cmake   # its CMake flags for scripts/install_llama.sh
    python -m tooling.ggml_cpu_variant --variant haswell --cmake   # a named variant's flags
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Iterable, Set
from pathlib import Path

# ggml's feature names -> the /proc/cpuinfo flags it checks with CPUID
# (ggml/src/ggml-cpu/arch/x86/cpu-feats.cpp), and the score each adds.
_FEATURES: dict[str, tuple[tuple[str, ...], int]] = {
    "FMA": (("fma",), 1),
    "F16C": (("f16c",), 1 << 1),
    "SSE42": (("sse4_2",), 1 << 2),
    "BMI2": (("bmi2",), 1 << 3),
    "AVX": (("avx",), 1 << 4),
    "AVX2": (("avx2",), 1 << 5),
    "AVX_VNNI": (("avx_vnni",), 1 << 6),
    "AVX512": (("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"), 1 << 7),
    "AVX512_VBMI": (("avx512vbmi",), 1 << 8),
    "AVX512_BF16": (("avx512_bf16",), 1 << 9),
    "AVX512_VNNI": (("avx512_vnni",), 1 << 10),
    "AMX_TILE": (("amx_tile",), 0),  # a build flag only: the score checks AMX_INT8
    "AMX_INT8": (("amx_int8",), 1 << 11),
}

# ggml/src/CMakeLists.txt, GGML_CPU_ALL_VARIANTS on x86 (the same list in llama.cpp b10361,
# node-llama-cpp 3.20.0's, and in llama-cpp-python 0.3.36's vendored copy).
_HASWELL = ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2")
VARIANTS: dict[str, tuple[str, ...]] = {
    "x64": (),
    "sse42": ("SSE42",),
    "sandybridge": ("SSE42", "AVX"),
    "ivybridge": ("SSE42", "AVX", "F16C"),
    "piledriver": ("SSE42", "AVX", "F16C", "FMA"),
    "haswell": _HASWELL,
    "skylakex": (*_HASWELL, "AVX512"),
    "cannonlake": (*_HASWELL, "AVX512", "AVX512_VBMI"),
    "cascadelake": (*_HASWELL, "AVX512", "AVX512_VNNI"),
    "icelake": (*_HASWELL, "AVX512", "AVX512_VBMI", "AVX512_VNNI"),
    "cooperlake": (*_HASWELL, "AVX512", "AVX512_VNNI", "AVX512_BF16"),
    "zen4": (*_HASWELL, "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16"),
    "alderlake": (*_HASWELL, "AVX_VNNI"),
    "sapphirerapids": (
        *_HASWELL,
        *("AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_TILE", "AMX_INT8"),
    ),
}
# Every option that selects an instruction set, so a variant's flags switch the others off.
_ALL_OPTIONS = tuple(_FEATURES)


def score(variant: str, cpu_flags: Set[str]) -> int:
    """ggml's score of `variant` on a CPU with `cpu_flags`: 0 when it cannot run there."""
    total = 1
    for feature in VARIANTS[variant]:
        needed, weight = _FEATURES[feature]
        if weight and not all(flag in cpu_flags for flag in needed):
            return 0
        total += weight
    return total


def choose(cpu_flags: Set[str]) -> str:
    """The variant ggml loads: the highest score; on a tie the first listed (a strict `>`)."""
    best, best_score = "x64", 0
    for variant in VARIANTS:
        s = score(variant, cpu_flags)
        if s > best_score:
            best, best_score = variant, s
    return best


def cmake_flags(variant: str) -> list[str]:
    """ggml's options for one variant, as ggml_add_cpu_backend_variant sets them (no -march)."""
    wanted = set(VARIANTS[variant])
    flags = ["-DGGML_NATIVE=OFF"]
    flags += [f"-DGGML_{name}={'ON' if name in wanted else 'OFF'}" for name in _ALL_OPTIONS]
    return flags


def cpu_flags(cpuinfo: Iterable[str]) -> frozenset[str]:
    """The feature flags of the first processor in /proc/cpuinfo's lines."""
    for line in cpuinfo:
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def this_machine() -> str:
    """The variant ggml picks on this machine's CPU ("native" off x86-64)."""
    if platform.machine().lower() not in {"x86_64", "amd64"}:
        return "native"
    with Path("/proc/cpuinfo").open(encoding="utf-8") as handle:
        return choose(cpu_flags(handle))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cmake", action="store_true", help="print the CMake flags")
    parser.add_argument(
        "--variant",
        choices=tuple(VARIANTS),
        help="this variant instead of this machine's (a build for other machines: an image)",
    )
    args = parser.parse_args(argv)
    variant = args.variant or this_machine()
    if variant == "native":
        print(f"not an x86-64 machine ({platform.machine()})", file=sys.stderr)
        return 2
    print(" ".join(cmake_flags(variant)) if args.cmake else variant)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
