"""tooling.ggml_cpu_variant picks the ggml CPU build the original loads, as ggml's own scoring
does, and gives ours the same flags (ADR 0058)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooling.ggml_cpu_variant import choose, cmake_flags, cpu_flags, main, score

HASWELL = frozenset({"sse4_2", "avx", "avx2", "f16c", "fma", "bmi2", "popcnt"})
AVX512 = frozenset({"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"})
# /proc/cpuinfo of the two-core machine the real-model goldens were recorded on (trimmed)
ICELAKE_CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse4_2 avx f16c fma bmi2 avx2 avx512f avx512dq avx512cd avx512bw avx512vl \
avx512ifma avx512vbmi avx512_vbmi2 avx512_vnni avx512_bitalg avx512_vpopcntdq
"""


def test_the_recording_machine_picks_icelake() -> None:
    assert choose(cpu_flags(ICELAKE_CPUINFO.splitlines())) == "icelake"


def test_an_avx2_cpu_picks_haswell_and_an_old_one_the_baseline() -> None:
    assert choose(HASWELL) == "haswell"
    assert choose(frozenset({"sse4_2"})) == "sse42"
    assert choose(frozenset()) == "x64"


def test_the_best_score_wins_among_the_runnable_variants() -> None:
    assert choose(HASWELL | AVX512) == "skylakex"
    assert choose(HASWELL | AVX512 | {"avx512_vnni"}) == "cascadelake"
    # a zen4 has BF16 too: its variant outscores icelake's
    assert choose(HASWELL | AVX512 | {"avx512vbmi", "avx512_vnni", "avx512_bf16"}) == "zen4"
    # AVX-VNNI (VEX) counts less than AVX-512
    assert choose(HASWELL | {"avx_vnni"}) == "alderlake"
    full = HASWELL | AVX512 | {"avx512vbmi", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8"}
    assert choose(full) == "sapphirerapids"


def test_a_variant_missing_one_feature_cannot_run() -> None:
    assert score("icelake", HASWELL | AVX512 | {"avx512_vnni"}) == 0
    assert score("skylakex", HASWELL | (AVX512 - {"avx512bw"})) == 0
    assert score("haswell", HASWELL) == 1 + 1 + 2 + 4 + 8 + 16 + 32


def test_the_flags_name_every_instruction_set_option() -> None:
    flags = cmake_flags("icelake")
    assert flags[0] == "-DGGML_NATIVE=OFF"
    assert "-DGGML_AVX512_VNNI=ON" in flags and "-DGGML_AVX512_VBMI=ON" in flags
    assert "-DGGML_AVX512_BF16=OFF" in flags and "-DGGML_AVX_VNNI=OFF" in flags
    assert not any(flag.endswith("=ON") for flag in cmake_flags("x64")[1:])


def test_a_named_variant_is_built_instead_of_this_machines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--variant", "haswell", "--cmake"]) == 0
    flags = capsys.readouterr().out.split()
    assert "-DGGML_AVX2=ON" in flags and "-DGGML_AVX512=OFF" in flags


def test_the_image_builds_a_portable_variant_with_the_module_it_needs() -> None:
    # the container image runs on other machines than the one that builds it
    dockerfile = (Path(__file__).parents[2] / "Dockerfile").read_text(encoding="utf-8")
    install = dockerfile[: dockerfile.index("scripts/install_llama.sh\n")]
    assert "QMD_GGML_VARIANT=haswell" in install
    assert "tooling/ggml_cpu_variant.py" in install
