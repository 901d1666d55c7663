#!/usr/bin/env bash
# Install what is needed (once) and run every test. Arguments go to pytest.
#   COLI_WHEEL_CACHE  where the llama.cpp reference wheel is kept between runs
#                     (default ~/.cache/colibri/wheels); it is built once, ~8 min on 2 cores.
COLI_EXTRAS="test"
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"

LLAMA_CPP_VERSION="0.3.36"
ensure_llama_cpp() {
    # llama.cpp is the reference for correctness; its Python wheel is compiled
    # for this CPU, so the cache is keyed by CPU flags as well as version.
    "$PY" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_CPP_VERSION')" 2>/dev/null && return
    local cpu_key cache wheel
    cpu_key="$( (uname -m; grep -m1 '^flags' /proc/cpuinfo 2>/dev/null) | sha256sum | cut -c1-12)"
    cache="${COLI_WHEEL_CACHE:-$HOME/.cache/colibri/wheels}/$cpu_key"
    wheel="$(ls "$cache"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl 2>/dev/null | head -n1 || true)"
    if [ -z "$wheel" ]; then
        command -v cmake >/dev/null || apt_install cmake
        command -v c++ >/dev/null || apt_install g++
        say "building the llama.cpp reference wheel once (~8 min on 2 cores) into $cache"
        mkdir -p "$cache"
        "$PY" -m pip wheel -q --no-deps "llama-cpp-python==$LLAMA_CPP_VERSION" -w "$cache"
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
exec "$PY" -m pytest "$@"
