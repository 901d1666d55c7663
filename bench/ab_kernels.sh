#!/bin/sh
# ab_kernels.sh — a kernel change measured against the commit before it, on a
# busy machine: builds one kernel bench (bench_iq14, bench_iq23, bench_lowk)
# from HEAD's engine ("old") and from the working tree ("new"), both with the
# working tree's bench source, runs them alternately ROUNDS times against the
# same llama.cpp libs and prints, per shape, the median of each side's
# ggml/ours ratios. Each run's ratio is already relative to ggml in the same
# process, so load that comes and goes moves both sides alike.
#   BENCH_TYPE=IQ4_NL BENCH_SHAPE=2880,2876,1 sh bench/ab_kernels.sh iq14 [rounds]
#   BENCH_TYPES=Q3_K BENCH_ROWS=1 sh bench/ab_kernels.sh lowk 5
# LIB (default the AVX2-only build of bench/ggml_avx2.sh), ISA (default avx2),
# REPS (interleaved runs inside each process, default 5).
set -e
B=${1:?usage: ab_kernels.sh iq14|iq23|lowk [rounds]}
R=${2:-3}
LIB=${LIB:-/tmp/llama_avx2/llama_cpp/lib}
OUT=${OUT:-/tmp/ab_kernels}
rm -rf "$OUT/old" && mkdir -p "$OUT/old"
git archive HEAD engine | tar x -C "$OUT/old"
cp -r bench "$OUT/old/"
build() { (cd "$1" && gcc -O3 -march=native -std=c11 -ffp-contract=off -pthread -Iengine/include engine/src/[a-z]*.c \
    "bench/bench_$B.c" -lm -ldl -o "$2"); }
build "$OUT/old" "$OUT/old_$B"
build . "$OUT/new_$B"
for i in $(seq "$R"); do
    for side in old new; do
        "$OUT/${side}_$B" "$LIB" "${ISA:-avx2}" "${REPS:-5}" 2>/dev/null | grep -E "ratio|ggml/ours" | sed "s/^/$side /"
    done
done | python3 -c '
import re, statistics, sys
runs = {}
for line in sys.stdin:
    m = re.match(r"(old|new) (\S+)\s+(?:batch\s+|decode\s+)?n_in\s+(\d+) n_out\s+(\d+) rows\s+(\d+):.*?(?:ratio|ggml/ours)\s+([\d.]+)", line)
    if m:
        runs.setdefault(m.group(2, 3, 4, 5), {}).setdefault(m.group(1), []).append(float(m.group(6)))
for (t, ni, no, rows), v in runs.items():
    old, new = ("%.2f" % statistics.median(v[k]) if k in v else "-" for k in ("old", "new"))
    print(f"{t:7} {ni:>5}x{no:<5} rows {rows:>2}: old {old} new {new}  (ggml/ours; runs {v})")
'
