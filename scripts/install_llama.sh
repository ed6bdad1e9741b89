#!/usr/bin/env bash
# Builds llama-cpp-python from source (PyPI ships only the sdist) as a wheel for this machine's
# ggml CPU variant (no -march=native) and installs it into the project venv. Idempotent: a wheel
# already in the wheel cache is reused, and nothing is done when the same build is already
# installed. The cache lives outside the checkout (default ~/.cache/qmd-reference/wheels, one
# folder per build), so fresh clones on one machine (CI) build only once.
#
#   scripts/install_llama.sh            # CPU build: ggml's CPU variant for this machine, GCC 11
#                                       # (the original's build, so the vectors are its own: ADR 0058)
#   QMD_LLAMA_CUDA=1 scripts/install_llama.sh   # CUDA build (needs nvcc; see docs/decisions/0005)
#
# Env: PYTHON (default .venv/bin/python), LLAMA_CPP_VERSION (default 0.3.36),
#      QMD_WHEEL_DIR (default ${XDG_CACHE_HOME:-~/.cache}/qmd-reference/wheels),
#      CMAKE_BUILD_PARALLEL_LEVEL (default: nproc), QMD_GGML_VARIANT (default: this machine's
#      ggml CPU variant, `python -m tooling.ggml_cpu_variant`; e.g. haswell for any AVX2 CPU).
#
#   scripts/install_llama.sh --wheel-dir   # print the wheel cache folder and exit
#   scripts/install_llama.sh --build-only  # build (or find) the wheel, install nothing: setup.sh
#                                          # runs this beside its other steps, then installs
#
# Two set-ups at once (two clones, two CI jobs on one machine) build the wheel once: the build
# runs under an exclusive lock (flock on $WHEEL_DIR/.build.lock); the second waits, then reuses.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
WHEEL_DIR="${QMD_WHEEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/qmd-reference/wheels}"
if [[ -n "${QMD_LLAMA_CUDA:-}" ]]; then
    # A CUDA wheel is a different artefact: keep it apart so a CPU wheel is never mistaken for it.
    WHEEL_DIR="$WHEEL_DIR/cuda"
fi

# The CPU build the original QMD loads here (node-llama-cpp ships one ggml library per x86
# feature level and picks by CPUID), compiled by GCC 11 as its binaries are (Ubuntu 22.04's
# 11.4): with both the same, our EmbeddingGemma vectors are the original's bit for bit; with
# GCC 12, or another level, they are 0.9997 apart and near-tied ranks swap (ADR 0058).
BUILD_ID=cuda
if [[ -z "${QMD_LLAMA_CUDA:-}" ]]; then
    # (the system's python3: the helper needs only the standard library, and the venv may not
    # be there yet)
    # QMD_GGML_VARIANT names another variant: a wheel for other machines than this one (the
    # container image is built for `haswell`, any x86-64 CPU with AVX2)
    chosen=(${QMD_GGML_VARIANT:+--variant "$QMD_GGML_VARIANT"})
    if VARIANT="$(python3 -m tooling.ggml_cpu_variant "${chosen[@]}")"; then
        CPU_FLAGS="$(python3 -m tooling.ggml_cpu_variant "${chosen[@]}" --cmake)"
    else
        # not x86-64: ggml's own choice for the build machine
        VARIANT=native
        CPU_FLAGS="-DGGML_NATIVE=ON"
    fi
    if [[ -z "${CC:-}${CXX:-}" ]] && command -v gcc-11 >/dev/null && command -v g++-11 >/dev/null; then
        export CC=gcc-11 CXX=g++-11
    fi
    COMPILER="$("${CXX:-c++}" -dumpfullversion 2>/dev/null || echo unknown)"
    [[ "$COMPILER" == 11.* ]] || echo "g++-11 not found (using ${CXX:-c++} $COMPILER): the embeddings will differ from the original's in the last bits (ADR 0058)" >&2
    BUILD_ID="cpu-$VARIANT-gcc${COMPILER%%.*}"
    WHEEL_DIR="$WHEEL_DIR/$BUILD_ID"
fi
if [[ "${1:-}" == "--wheel-dir" ]]; then
    echo "$WHEEL_DIR"
    exit 0
fi
BUILD_ONLY=0
[[ "${1:-}" == "--build-only" ]] && BUILD_ONLY=1
# Recorded beside the installed libraries (llama_cpp/lib/qmd-build): another build of the same
# version is replaced, and the real-model goldens know which build answers (ADR 0058).
marker() {
    "$PYTHON" -c 'import importlib.util as u, pathlib; print(pathlib.Path(u.find_spec("llama_cpp").origin).parent / "lib" / "qmd-build")' 2>/dev/null
}

installed="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))' 2>/dev/null || true)"
recorded="$(cat "$(marker)" 2>/dev/null || true)"
if [[ "$installed" == "$VERSION" && "$recorded" == "$VERSION $BUILD_ID" && -z "${QMD_LLAMA_REINSTALL:-}" ]]; then
    echo "llama-cpp-python $VERSION ($BUILD_ID) already installed in $PYTHON"
    exit 0
fi

# Only the libraries the Python bindings load (libllama, libggml*): no multimodal library
# (LLAVA_BUILD=OFF; nothing here reads images or audio) and no llama-common (chat parsers,
# argument parsing, an HTTP client; the bindings never load it). llama-cpp-python forces
# LLAMA_BUILD_COMMON on, so scripts/llama_no_common.cmake turns it off inside llama.cpp's own
# project. 74 objects to compile instead of 178 (CONTRIBUTING.md, "CI's time").
LEAN="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAVA_BUILD=OFF"
LEAN="$LEAN -DCMAKE_PROJECT_llama.cpp_INCLUDE_BEFORE=$PWD/scripts/llama_no_common.cmake"
if [[ -n "${QMD_LLAMA_CUDA:-}" ]]; then
    FLAGS="-DGGML_CUDA=on $LEAN"
else
    # No -march=native: exactly the flags of ggml's variant, which the wheel cache is keyed by.
    FLAGS="$CPU_FLAGS $LEAN"
fi
mkdir -p "$WHEEL_DIR"

# Held from here to the end of the script (fd 9 closes with it): look for the wheel, build it if
# missing, install it. A set-up that finds the lock taken waits and then finds the wheel.
if command -v flock >/dev/null; then
    exec 9>"$WHEEL_DIR/.build.lock"
    if ! flock -n 9; then
        echo "waiting for another set-up building llama-cpp-python in $WHEEL_DIR"
        flock 9
    fi
else
    echo "flock not found: two set-ups at once would each build the wheel" >&2
fi

shopt -s nullglob
wheels=("$WHEEL_DIR"/llama_cpp_python-"$VERSION"-*.whl)
if (( ${#wheels[@]} == 0 )); then
    echo "building llama-cpp-python $VERSION wheel (measured 5 CPU-minutes, user+sys; the wall time depends on how busy the cores are) with: $FLAGS"
    start=$SECONDS
    CMAKE_ARGS="${CMAKE_ARGS:-$FLAGS}" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
        "$PYTHON" -m pip wheel --no-deps --no-cache-dir -w "$WHEEL_DIR" "llama-cpp-python==$VERSION" 9>&-
    # (9>&-: a compiler cache daemon the build starts must not hold the lock after we exit;
    # --no-cache-dir: pip's own cache of built wheels ignores CMAKE_ARGS and the compiler)
    echo "built in $((SECONDS - start)) s"
    wheels=("$WHEEL_DIR"/llama_cpp_python-"$VERSION"-*.whl)
else
    echo "reusing ${wheels[0]}"
fi

if (( BUILD_ONLY )); then
    echo "wheel ready: ${wheels[0]}"
    exit 0
fi
"$PYTHON" -m pip install --force-reinstall --no-deps "${wheels[0]}"
installed_marker="$(marker)"
[[ -z "$installed_marker" ]] || echo "$VERSION $BUILD_ID" >"$installed_marker"
# The wheel's own runtime deps (numpy, typing-extensions, diskcache, jinja2) come from PyPI.
"$PYTHON" -m pip install "numpy>=1.20" "typing-extensions>=4.5" "diskcache>=5.6.1" "jinja2>=2.11.3"
"$PYTHON" -c 'import llama_cpp; print("llama-cpp-python", llama_cpp.__version__, "ok")'
