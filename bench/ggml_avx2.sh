#!/bin/sh
# ggml_avx2.sh — our AVX2 kernel table against an AVX2-only llama.cpp 0.3.36
# (issue #19): takes the one scripts/test.sh installs for its AVX2 pass
# (.venv/reference-avx2), else builds one (no AVX-512, no AVX-VNNI; ~5 min on
# 2 cores) into $LLAMA_AVX2 (default /tmp/llama_avx2), then the kernel benches
# (bench_iq14, bench_iq23, bench_lowk) with `avx2` against its libs.
#   sh bench/ggml_avx2.sh [rounds]          (from the repository root)
# --no-cache-dir: pip would otherwise reuse the AVX-512 wheel it built for the venv.
# SDIST=path/to/llama_cpp_python-0.3.36.tar.gz builds from a local sdist;
# BENCHES="iq14 lowk" picks benches; BENCH_TYPE / BENCH_TYPES pass through.
set -e
ROUNDS=${1:-3}
PY=${PY:-.venv/bin/python}
[ -z "${LLAMA_AVX2:-}" ] && [ -f .venv/reference-avx2/llama_cpp/lib/libggml-cpu.so ] && LLAMA_AVX2=.venv/reference-avx2
LLAMA_AVX2=${LLAMA_AVX2:-/tmp/llama_avx2}
LIB=$LLAMA_AVX2/llama_cpp/lib
OUT=${OUT:-/tmp/ggml_avx2_bench}
if [ ! -f "$LIB/libggml-cpu.so" ]; then
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF" \
        "$PY" -m pip install --no-deps --no-cache-dir --no-binary llama-cpp-python --target "$LLAMA_AVX2" \
        "${SDIST:-llama-cpp-python==0.3.36}"
fi
if objdump -d "$LIB/libggml-cpu.so" | grep -q zmm; then
    echo "$LIB/libggml-cpu.so uses AVX-512: not an AVX2-only build" >&2
    exit 1
fi
mkdir -p "$OUT"
for b in ${BENCHES:-iq14 iq23 lowk}; do
    gcc -O3 -march=native -std=c11 -ffp-contract=off -pthread -Iengine/include engine/src/[a-z]*.c \
        bench/bench_$b.c -lm -ldl -o "$OUT/bench_$b"
    "$OUT/bench_$b" "$LIB" avx2 "$ROUNDS"
done
