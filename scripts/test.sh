#!/usr/bin/env bash
# Install what is needed (once) and run every test. Arguments go to pytest.
#   COLI_WHEEL_CACHE  where the llama.cpp reference wheel is kept between runs
#                     (default ~/.cache/colibri/wheels); it is built once, ~8 min on 2 cores.
COLI_EXTRAS="test"
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

LLAMA_CPP_VERSION="0.3.36"

llama_cmake_args() {
    # This CPU's SIMD, named explicitly rather than GGML_NATIVE: native builds
    # turn on ggml's AMX path, which crashes in ggml_backend_amx_mul_mat on the
    # default model (seen with 0.3.36), so AMX stays off.
    local flags args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    has() { [[ "$flags" == *" $1 "* ]]; }
    has avx && args+=" -DGGML_AVX=ON"
    has avx2 && args+=" -DGGML_AVX2=ON"
    has fma && args+=" -DGGML_FMA=ON"
    has f16c && args+=" -DGGML_F16C=ON"
    has avx_vnni && args+=" -DGGML_AVX_VNNI=ON"
    has avx512f && args+=" -DGGML_AVX512=ON"
    has avx512vbmi && args+=" -DGGML_AVX512_VBMI=ON"
    has avx512_vnni && args+=" -DGGML_AVX512_VNNI=ON"
    has avx512_bf16 && args+=" -DGGML_AVX512_BF16=ON"
    echo "$args"
}

ensure_llama_cpp() {
    # llama.cpp is the reference for correctness; its Python wheel is compiled
    # for this CPU, so the cache is keyed by the build flags as well as version.
    "$PY" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_CPP_VERSION')" 2>/dev/null && return
    local cpu_key cache wheel cmake_args
    cmake_args="$(llama_cmake_args)"
    cpu_key="$( (uname -m; echo "$cmake_args") | sha256sum | cut -c1-12)"
    cache="${COLI_WHEEL_CACHE:-$HOME/.cache/colibri/wheels}/$cpu_key"
    wheel="$(ls "$cache"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl 2>/dev/null | head -n1 || true)"
    if [ -z "$wheel" ]; then
        command -v cmake >/dev/null || apt_install cmake
        command -v c++ >/dev/null || apt_install g++
        say "building the llama.cpp reference wheel once (~8 min on 2 cores) into $cache"
        mkdir -p "$cache"
        CMAKE_ARGS="$cmake_args" "$PY" -m pip wheel -q --no-deps --no-binary llama-cpp-python \
            "llama-cpp-python==$LLAMA_CPP_VERSION" -w "$cache"
        wheel="$(ls "$cache"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl | head -n1)"
    fi
    say "installing $(basename "$wheel")"
    "$PY" -m pip install -q --no-deps "$wheel"
    # its runtime dependencies, without letting pip rebuild it from source
    "$PY" -m pip install -q "typing-extensions>=4.5" "diskcache>=5.6.1" "numpy>=1.20"
}

ensure_llama_cpp
say "building the sanitizer build of the engine (make -C engine asan)"
make -s -C "$ROOT/engine" asan
cd "$ROOT"
# the reference is installed above: a test that cannot import it must fail, not skip
export COLI_REQUIRE_REFERENCE=1
exec "$PY" -m pytest "$@"
