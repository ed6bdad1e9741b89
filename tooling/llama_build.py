"""Which llama.cpp build `qmd` loads, and so how the real-model goldens compare (ADR 0059).

scripts/install_llama.sh records its build beside the libraries it installs
(`llama_cpp/lib/qmd-build`: the version, then `cpu-<ggml variant>-gcc<major>` or `cuda`). The
goldens recorded from the original hold byte for byte only on the original's own build: the
ggml variant it loaded when they were recorded, compiled by GCC 11. Any other build keeps
ADR 0058's tolerance on the printed scores. The goldens test and the line a test run ends with
(tests/conftest.py) both decide here, so a CI log says which comparison it checked.

    python -m tooling.llama_build              # the installed build (.ci/run's last line)
    python -m tooling.llama_build FILE         # the build a qmd-build file records
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

BYTE_IDENTITY = "byte identity"
TOLERANCE = "tolerance (ADR 0058)"
# The original's binaries are built by Ubuntu 22.04's GCC 11 (ADR 0059).
ORIGINALS_COMPILER = "gcc11"


@dataclass(frozen=True)
class LlamaBuild:
    """One line of `qmd-build`: `0.3.36 cpu-icelake-gcc11`; `unrecorded` when there is none."""

    version: str
    build_id: str

    @property
    def variant(self) -> str | None:
        """The ggml CPU variant (`icelake`, `native` off x86-64); None for CUDA or unrecorded."""
        parts = self.build_id.split("-")
        return parts[1] if len(parts) == 3 and parts[0] == "cpu" else None

    @property
    def compiler(self) -> str | None:
        """`GCC 11` for `gcc11` (install_llama.sh writes `gccunknown` when it cannot tell)."""
        parts = self.build_id.split("-")
        if len(parts) != 3 or not parts[2].startswith("gcc"):
            return None
        major = parts[2].removeprefix("gcc")
        return f"GCC {major}" if major.isdigit() else "an unknown compiler"

    def describe(self) -> str:
        """`cpu-icelake-gcc11 (ggml variant icelake, GCC 11)`: the build and what it means."""
        if self.variant is not None:
            return f"{self.build_id} (ggml variant {self.variant}, {self.compiler})"
        if self.build_id == "unrecorded":
            return "unrecorded (no llama_cpp/lib/qmd-build: not built by scripts/install_llama.sh)"
        return self.build_id


UNRECORDED = LlamaBuild(version="", build_id="unrecorded")


def parse(text: str) -> LlamaBuild:
    """The build a `qmd-build` file names; UNRECORDED for an empty or garbled one."""
    words = text.split()
    if len(words) != 2:
        return UNRECORDED
    return LlamaBuild(version=words[0], build_id=words[1])


def build_file() -> Path | None:
    """Where install_llama.sh records the build of the llama_cpp this interpreter imports."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "lib" / "qmd-build"


def installed() -> LlamaBuild:
    """The build of the llama_cpp this interpreter would load (without loading it)."""
    path = build_file()
    if path is None or not path.is_file():
        return UNRECORDED
    return parse(path.read_text(encoding="utf-8"))


def originals_build_id(goldens_variant: str) -> str:
    """install_llama.sh's name for the original's build on the goldens' recording machine."""
    return f"cpu-{goldens_variant}-{ORIGINALS_COMPILER}"


def byte_identical(build: LlamaBuild, goldens_variant: str) -> bool:
    """Whether the goldens must hold byte for byte on this build (else within the tolerance)."""
    return build.build_id == originals_build_id(goldens_variant)


def comparison(build: LlamaBuild, goldens_variant: str) -> str:
    return BYTE_IDENTITY if byte_identical(build, goldens_variant) else TOLERANCE


def report_line(build: LlamaBuild, goldens_variant: str) -> str:
    """The one line a run of the goldens ends with: our build, the goldens', the comparison."""
    how = "by" if byte_identical(build, goldens_variant) else "within"
    originals = originals_build_id(goldens_variant)
    return (
        f"real-model goldens: llama.cpp build {build.describe()}, the original's {originals}: "
        f"compared {how} {comparison(build, goldens_variant)}"
    )


def main(argv: list[str] | None = None) -> int:
    """Print the build: the installed one, or the one a `qmd-build` file given as argument names."""
    args = sys.argv[1:] if argv is None else argv
    build = parse(Path(args[0]).read_text(encoding="utf-8")) if args else installed()
    print(" ".join(("llama.cpp", *filter(None, (build.version, build.describe())))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
