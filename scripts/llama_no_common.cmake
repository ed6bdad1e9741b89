# Read by scripts/install_llama.sh's build as CMAKE_PROJECT_llama.cpp_INCLUDE_BEFORE, in the
# scope of llama.cpp's own CMakeLists, before its option(LLAMA_BUILD_COMMON ...). llama-cpp-python
# sets that option ON in its cache; a plain variable here takes precedence (policy CMP0077) for
# llama.cpp and its subfolders only, so llama-common and cpp-httplib are neither built nor
# installed. The Python bindings load libllama and libggml*, never libllama-common.
set(LLAMA_BUILD_COMMON OFF)
