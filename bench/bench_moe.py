"""MoE engine speed against llama.cpp on the benchmark-size synthetic files
(tests/fixtures/moe_models.py: 24 layers, n_embd 1024, 64 experts top-8 of
width 512), at Q4_0 and Q8_0: prefill tok/s on a 256-token prompt, decode tok/s
over 128 greedy tokens, peak RSS, and the decode roofline: the bytes one token
reads (the dense part + n_expert_used experts per layer, in the file's types)
against this machine's measured memory read bandwidth.

Children, interleaving and medians are bench_engine.py's (the same child code
runs here). The files are generated on first use into COLI_FIXTURE_DIR (or
~/.cache/colibri/fixtures): about 1.4 GB (Q4_0) and 2.7 GB (Q8_0), a minute each.
`--quants UD-IQ2_XXS` is the same model as an Unsloth dynamic quant: routed
experts IQ2_XXS (any low-bit type: UD-<type>), attention and embeddings Q4_K,
output Q6_K; 0.7 GB, written by llama.cpp's quantizer in about a minute and a half.

    python bench/bench_moe.py [--arch qwen3moe] [--quants Q4_0,Q8_0|UD-IQ2_XXS] [--threads 2]
                              [--reps 3] [--isa avx2] [--peer-only] [--flash-attn off|on|both]
                              [--ctx 512 --prompt-tokens 256] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import CHILD, ROOT, run_as_isa  # noqa: E402

sys.path.insert(0, ROOT)
from tests.fixtures import moe_models  # noqa: E402

# bench_engine's child, run so that an engine refusing the model (EngineError,
# e.g. "unsupported") reports {"refused": message} instead of failing the run
WRAPPED_CHILD = r"""
import json, sys
code = sys.argv.pop(1)
try:
    exec(compile(code, "<bench_engine child>", "exec"), {"__name__": "__main__"})
except Exception as e:
    if type(e).__name__ != "EngineError":
        raise
    print(json.dumps({"refused": str(e)}))
"""

BANDWIDTH_C = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef struct { const uint64_t *p; size_t n; uint64_t sum; } job;
static void *reader(void *arg) {  /* 8 independent accumulators: the loads, not the adds, limit it */
    job *j = arg; uint64_t s[8] = {0};
    for (size_t i = 0; i + 8 <= j->n; i += 8)
        for (int k = 0; k < 8; k++) s[k] ^= j->p[i + k];
    for (int k = 0; k < 8; k++) j->sum ^= s[k];
    return NULL;
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
    int nt = atoi(argv[1]); size_t bytes = (size_t)atoll(argv[2]); int reps = atoi(argv[3]);
    size_t n = bytes / 8; uint64_t *buf = malloc(n * 8);
    if (!buf) return 1;
    memset(buf, 1, n * 8);
    double best = 1e30; uint64_t chk = 0;
    for (int r = 0; r < reps; r++) {
        pthread_t th[64]; job jobs[64];
        double t0 = now();
        for (int t = 0; t < nt; t++) {
            jobs[t] = (job){buf + n / nt * t, n / nt, 0};
            pthread_create(&th[t], NULL, reader, &jobs[t]);
        }
        for (int t = 0; t < nt; t++) { pthread_join(th[t], NULL); chk ^= jobs[t].sum; }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf("%.6f %llu\n", (double)(n / nt * nt * 8) / best / 1e9, (unsigned long long)chk);
    return 0;
}
"""


def measure_bandwidth(threads: int, mib: int = 1024, reps: int = 5) -> tuple[float, str]:
    """Best-of-reps read bandwidth in GB/s with `threads` readers over a buffer far
    larger than the caches: a small C program if a compiler is at hand, else numpy."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc:
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "bw.c"), os.path.join(d, "bw")
            with open(src, "w") as f:
                f.write(BANDWIDTH_C)
            built = subprocess.run([cc, "-O3", "-march=native", "-pthread", "-o", exe, src], capture_output=True)
            if built.returncode == 0:
                out = subprocess.run([exe, str(threads), str(mib << 20), str(reps)], capture_output=True,
                                     text=True, timeout=300)
                if out.returncode == 0:
                    return float(out.stdout.split()[0]), f"C reader, {threads} threads, {mib} MiB"
    import numpy as np

    a = np.ones((threads, (mib << 20) // 8 // threads), dtype=np.int64)
    best = float("inf")
    for _ in range(reps):
        ts = [threading.Thread(target=np.bitwise_xor.reduce, args=(a[t],)) for t in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        best = min(best, time.perf_counter() - t0)
    return a.nbytes / best / 1e9, f"numpy reader, {threads} threads, {mib} MiB"


def active_bytes(path: str) -> tuple[int, int, int]:
    """(bytes one decoded token reads, of which expert bytes, file tensor bytes):
    every tensor whole, except one row of token_embd and n_expert_used of the
    n_expert slices of each *_exps tensor."""
    import gguf

    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def field(key):
        return int(r.fields[f"{arch}.{key}"].parts[-1][0])

    n_expert, n_used = field("expert_count"), field("expert_used_count")
    total = active = experts = 0
    skip = set()
    if f"{arch}.nextn_predict_layers" in r.fields and field("nextn_predict_layers"):
        first_mtp = field("block_count") - field("nextn_predict_layers")
        skip = {f"blk.{i}." for i in range(first_mtp, field("block_count"))}
    for t in r.tensors:
        n = int(t.n_bytes)
        total += n
        if any(t.name.startswith(s) for s in skip):
            continue
        if t.name == "token_embd.weight":
            active += n // int(t.shape[-1])
        elif "_exps." in t.name:
            part = n * n_used // n_expert
            active += part
            experts += part
        else:
            active += n
    return active, experts, total


def run_child(engine: str, model: str, args) -> dict:
    """One run; "llama.cpp+fa" is llama.cpp with flash attention on."""
    env = dict(os.environ, COLI_BENCH_FLASH_ATTN="1" if engine.endswith("+fa") else "0")
    cmd = [sys.executable, "-c", WRAPPED_CHILD, CHILD, engine.removesuffix("+fa"), model, str(args.threads),
           str(args.prompt_tokens), str(args.gen_tokens), str(args.ctx), ROOT]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{engine} run failed on {model}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_file(model: str, args, bw: float) -> dict:
    peers = {"off": ["llama.cpp"], "on": ["llama.cpp+fa"], "both": ["llama.cpp", "llama.cpp+fa"]}[args.flash_attn]
    engines = peers if args.peer_only else ["colibri"] + peers
    results: dict[str, list[dict]] = {e: [] for e in engines}
    refused: dict[str, str] = {}
    for rep in range(args.reps):
        for engine in engines:
            if engine in refused:
                continue
            r = run_child(engine, model, args)
            if "refused" in r:
                refused[engine] = r["refused"]
                print(f"[rep {rep + 1}/{args.reps}] {engine:10s} REFUSES this model: {r['refused']}",
                      file=sys.stderr, flush=True)
                continue
            results[engine].append(r)
            print(f"[rep {rep + 1}/{args.reps}] {engine:10s} prefill {r['prefill']:8.1f} tok/s  "
                  f"decode {r['decode']:7.1f} tok/s  rss {r['rss_mb']:7.1f} MiB", file=sys.stderr, flush=True)
    med = {e: {k: statistics.median(r[k] for r in rs) for k in ("prefill", "decode", "rss_mb")}
           for e, rs in results.items() if rs}
    active, experts, total = active_bytes(model)
    roof = bw * 1e9 / active
    print(f"\n{os.path.basename(model)}: {os.path.getsize(model) / 1e9:.2f} GB, {args.threads} threads, "
          f"{args.reps} interleaved reps, {args.prompt_tokens}-token prompt, {args.gen_tokens} generated")
    print(f"active bytes/token {active / 1e6:.1f} MB ({experts / 1e6:.1f} MB experts, "
          f"{(active - experts) / 1e6:.1f} MB dense); roofline {roof:.1f} tok/s at {bw:.1f} GB/s")
    print(f"{'':12s}{'prefill tok/s':>15s}{'decode tok/s':>15s}{'of roofline':>13s}{'peak RSS MiB':>15s}"
          f"   decode min-max")
    for e in engines:
        if e in med:
            m, dec = med[e], [r["decode"] for r in results[e]]
            print(f"{e:12s}{m['prefill']:15.1f}{m['decode']:15.1f}{100 * m['decode'] / roof:12.0f}%"
                  f"{m['rss_mb']:15.1f}   {min(dec):.1f}-{max(dec):.1f}")
        else:
            print(f"{e:12s}  refused: {refused[e]}")
    ratio = None
    for peer in peers:
        if "colibri" in med and peer in med:
            r = {k: med["colibri"][k] / med[peer][k] for k in ("prefill", "decode", "rss_mb")}
            ratio = ratio or r  # the first peer's (flash attention off unless --flash-attn on)
            label = "ratio" if len(peers) == 1 else f"vs {peer}"
            print(f"{label:12s}{r['prefill']:15.2f}x{r['decode']:14.2f}x{'':13s}{r['rss_mb']:14.2f}x")
    return {"model": model, "file_bytes": os.path.getsize(model), "active_bytes": active, "expert_bytes": experts,
            "tensor_bytes": total, "roofline_tok_s": roof, "median": med, "ratio": ratio, "refused": refused,
            "runs": results}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="qwen3moe", choices=moe_models.ARCHS)
    ap.add_argument("--quants", default="Q4_0,Q8_0",
                    help="comma-separated ggml types of the matrices, or UD-<type>: experts of that low-bit type in "
                         "an Unsloth-like mix (UD-IQ2_XXS)")
    ap.add_argument("--model", default=None, help="benchmark this GGUF file instead of the generated ones")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--isa", choices=("scalar", "avx2", "avxvnni", "avx512"), default=None,
                    help="avx2 / avxvnni: both engines as on a CPU without AVX-512 (bench_engine.run_as_isa); "
                         "scalar / avx512: force colibri's kernels")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--peer-only", action="store_true", help="run llama.cpp alone")
    ap.add_argument("--flash-attn", choices=("off", "on", "both"), default="off",
                    help="llama.cpp's flash attention: off (the arithmetic colibri mirrors), on, or both (two peers)")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    isa_line = run_as_isa(args.isa)  # read by bench_engine's child
    if isa_line:
        print(isa_line, file=sys.stderr)

    t0 = time.time()
    if args.model:
        models = [args.model]
    else:
        models = []
        for q in args.quants.split(","):
            g0 = time.time()
            path = moe_models.bench_preset(args.arch, q.strip())
            print(f"{path} ready ({time.time() - g0:.0f} s)", file=sys.stderr, flush=True)
            models.append(str(path))
    load0 = os.getloadavg()[0]
    bw, how = measure_bandwidth(args.threads)
    print(f"memory read bandwidth: {bw:.1f} GB/s ({how}, best of 5)", file=sys.stderr, flush=True)
    out = {"args": vars(args), "bandwidth_gb_s": bw, "bandwidth_method": how,
           "files": [bench_file(m, args, bw) for m in models]}
    load = (load0, os.getloadavg()[0])
    out["load_average"] = load
    print(f"\nmemory read bandwidth {bw:.1f} GB/s ({how}); total {time.time() - t0:.0f} s; "
          f"1-min load average {load[0]:.1f} at start, {load[1]:.1f} at end, {os.cpu_count()} CPUs")
    noisy = [f"{os.path.basename(f['model'])} {e}" for f in out["files"] for e, rs in f["runs"].items()
             if len(rs) > 1 and max(r["decode"] for r in rs) > 1.5 * min(r["decode"] for r in rs)]
    if noisy:
        print(f"NOISY: decode varied more than 1.5x between reps ({'; '.join(noisy)}): other work shared "
              "these cores (llama.cpp's spinning threads slow down up to 100x when preempted); rerun on an "
              "idle machine or with more --reps before trusting the medians")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
