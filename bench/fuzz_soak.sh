#!/usr/bin/env bash
# The long fuzz runs the test suite runs short (tests/engine/test_fuzz_gguf_cov.py,
# tests/sidecar/test_fuzz_api.py):
#   1. the GGUF reader under libFuzzer + ASan + UBSan (engine/build/fuzz/fuzz_gguf, clang),
#      seeded with real and generated files, for GGUF_RUNS executions (default 1,000,000),
#      then the coverage its corpus reaches;
#   2. schemathesis against `coli serve` from the vendors' OpenAPI schemas of /v1/models,
#      chat, completions and /v1/messages, API_CASES cases (default 5,000).
# Each prints its figures; the exit status is non-zero when either found a problem.
#
#   bench/fuzz_soak.sh                       # both
#   bench/fuzz_soak.sh gguf                  # only the GGUF fuzzer (or: api)
#   GGUF_RUNS=5000000 API_CASES=20000 bench/fuzz_soak.sh
#   GGUF_CORPUS=DIR   keep the fuzzer's corpus there (default: a scratch folder)
#   PYTHON=...        the interpreter with colibri and the test extra (default: .venv/bin/python)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
WHAT="${1:-all}"
rc=0

gguf() {
    make -s -C "$ROOT/engine" fuzz
    local scratch seeds corpus
    scratch="$(mktemp -d)"
    seeds="$scratch/seeds"
    corpus="${GGUF_CORPUS:-$scratch/corpus}"
    mkdir -p "$corpus"
    (cd "$ROOT" && "$PY" -m tests.engine.gguf_seeds "$seeds" >/dev/null)
    echo "== GGUF reader: libFuzzer + ASan + UBSan, ${GGUF_RUNS:-1000000} executions"
    local start end
    start=$(date +%s)
    if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$ROOT/engine/build/fuzz/fuzz_gguf" -runs="${GGUF_RUNS:-1000000}" -print_final_stats=1 -timeout=10 \
        -rss_limit_mb=2048 -artifact_prefix="$scratch/" "$corpus" "$seeds" 2>"$scratch/fuzz.log"; then
        tail -n 60 "$scratch/fuzz.log"
        echo "GGUF: CRASH (artifacts in $scratch)"
        rc=1
        return
    fi
    end=$(date +%s)
    grep '^stat::' "$scratch/fuzz.log"
    local total replay edges features
    total="$(grep -o 'Loaded 1 modules *([0-9]*' "$scratch/fuzz.log" | grep -o '[0-9]*$' | head -n1)"
    replay="$("$ROOT/engine/build/fuzz/fuzz_gguf" -runs=0 "$corpus" 2>&1 | grep -o 'cov: [0-9]* ft: [0-9]*' | tail -n1)"
    edges="$(echo "$replay" | cut -d' ' -f2)"
    features="$(echo "$replay" | cut -d' ' -f4)"
    echo "GGUF: 0 crashes, $(grep -o 'number_of_executed_units: *[0-9]*' "$scratch/fuzz.log" | grep -o '[0-9]*$') executions in $((end - start)) s, corpus $(ls "$corpus" | wc -l) files, $edges of $total edges covered ($((100 * edges / total))%), $features features"
    [ -n "${GGUF_CORPUS:-}" ] || rm -rf "$scratch"
}

api() {
    echo "== coli serve: schemathesis from the vendors' schemas, ${API_CASES:-5000} cases"
    (cd "$ROOT" && "$PY" -m tests.sidecar.api_fuzz --cases "${API_CASES:-5000}") || rc=1
}

case "$WHAT" in
    gguf) gguf ;;
    api) api ;;
    all) gguf; api ;;
    *) echo "usage: $0 [all|gguf|api]" >&2; exit 2 ;;
esac
exit $rc
