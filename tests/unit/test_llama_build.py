"""tooling.llama_build: the build scripts/install_llama.sh recorded (`llama_cpp/lib/qmd-build`)
decides how the real-model goldens compare, and a run says so in one line (ADR 0059)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tooling import llama_build

ROOT = Path(__file__).resolve().parents[2]
ORIGINALS = "cpu-icelake-gcc11"
UNRECORDED = "unrecorded (no llama_cpp/lib/qmd-build: not built by scripts/install_llama.sh)"


@pytest.mark.parametrize(
    ("recorded", "described", "comparison"),
    [
        # the original's build on the goldens' machine: bytes
        (
            "0.3.36 cpu-icelake-gcc11\n",
            "cpu-icelake-gcc11 (ggml variant icelake, GCC 11)",
            "compared by byte identity",
        ),
        # another CPU: the original itself would differ from its goldens
        (
            "0.3.36 cpu-haswell-gcc11\n",
            "cpu-haswell-gcc11 (ggml variant haswell, GCC 11)",
            "compared within tolerance (ADR 0058)",
        ),
        # no GCC 11 at hand: the one-row attention path rounds otherwise
        (
            "0.3.36 cpu-icelake-gcc12\n",
            "cpu-icelake-gcc12 (ggml variant icelake, GCC 12)",
            "compared within tolerance (ADR 0058)",
        ),
        (
            "0.3.36 cpu-icelake-gccunknown\n",
            "cpu-icelake-gccunknown (ggml variant icelake, an unknown compiler)",
            "compared within tolerance (ADR 0058)",
        ),
        (
            "0.3.36 cpu-native-gcc12\n",
            "cpu-native-gcc12 (ggml variant native, GCC 12)",
            "compared within tolerance (ADR 0058)",
        ),
        ("0.3.36 cuda\n", "cuda", "compared within tolerance (ADR 0058)"),
        ("", UNRECORDED, "compared within tolerance (ADR 0058)"),
        ("garbled", UNRECORDED, "compared within tolerance (ADR 0058)"),
    ],
)
def test_each_recorded_build_names_its_comparison(
    recorded: str, described: str, comparison: str
) -> None:
    build = llama_build.parse(recorded)
    line = llama_build.report_line(build, "icelake")
    assert line == (
        f"real-model goldens: llama.cpp build {described}, the original's {ORIGINALS}: {comparison}"
    )
    assert llama_build.byte_identical(build, "icelake") == comparison.endswith("byte identity")


def test_goldens_recorded_on_another_variant_want_that_variant() -> None:
    build = llama_build.parse("0.3.36 cpu-icelake-gcc11")
    assert llama_build.comparison(build, "haswell") == llama_build.TOLERANCE
    assert llama_build.comparison(build, "icelake") == llama_build.BYTE_IDENTITY


def test_the_command_names_a_build_in_one_line(tmp_path: Path) -> None:
    """What .ci/run's last line quotes (there, the build of this interpreter's llama_cpp)."""
    recorded = tmp_path / "qmd-build"
    recorded.write_text("0.3.36 cpu-icelake-gcc11\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "tooling.llama_build", str(recorded)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == "llama.cpp 0.3.36 cpu-icelake-gcc11 (ggml variant icelake, GCC 11)\n"
