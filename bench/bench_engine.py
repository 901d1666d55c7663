"""Engine speed against llama.cpp on the same GGUF file: prefill tok/s on a
256-token prompt, decode tok/s over 128 greedy tokens, peak RSS.

Each run is a fresh child process (so peak RSS is its own), colibri and
llama.cpp alternate (so machine noise hits both alike), and the medians and
their ratio are printed:

    python bench/bench_engine.py [--model M] [--threads 2] [--reps 5] [--isa avx2] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
engine, model, threads, n_prompt, n_gen, ctx = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
sys.path.insert(0, sys.argv[7])
from tests.reference import real_text
if engine == "colibri":
    import os
    from colibri.engine import Engine
    if os.environ.get("COLI_BENCH_ISA"):  # --isa: force colibri's kernel set (llama.cpp keeps its own)
        from colibri._engine import lib
        assert lib.colibri_kernel_set_isa(os.environ["COLI_BENCH_ISA"].encode()) == 0, "this CPU lacks that ISA"
    else:  # the kernel sets and prefetch level a load picks (kernel_choice.py; cached after the first)
        from colibri import kernel_choice
        kernel_choice.choose(model)
    e = Engine(model, n_ctx=ctx, n_threads=threads)
    prompt = e.tokenize(real_text())[:n_prompt]
    c0 = time.process_time(); t0 = time.perf_counter(); e.eval(prompt, 0); t1 = time.perf_counter(); c1 = time.process_time()
    pos = len(prompt)
    for _ in range(n_gen):
        tok, _ = e.sample(); e.eval([tok], pos); pos += 1
    t2 = time.perf_counter(); c2 = time.process_time()
else:
    import os, numpy as np, llama_cpp
    # COLI_BENCH_FLASH_ATTN=1: llama.cpp with flash attention on (its default build path is off here)
    m = llama_cpp.Llama(model_path=model, n_ctx=ctx, n_threads=threads, n_threads_batch=threads, n_batch=512,
                        logits_all=False, verbose=False, flash_attn=os.environ.get("COLI_BENCH_FLASH_ATTN") == "1")
    prompt = m.tokenize(real_text().encode(), add_bos=True)[:n_prompt]
    c0 = time.process_time(); t0 = time.perf_counter(); m.eval(prompt); t1 = time.perf_counter(); c1 = time.process_time()
    for _ in range(n_gen):
        # the last row's logits (without logits_all, Llama.scores is not filled)
        tok = int(np.argmax(np.ctypeslib.as_array(m._ctx.get_logits(), shape=(m.n_vocab(),)))); m.eval([tok])
    t2 = time.perf_counter(); c2 = time.process_time()
# CPU-time rates: what each token costs in core-seconds (robust on a shared machine at 1 thread)
print(json.dumps({"prefill": len(prompt) / (t1 - t0), "decode": n_gen / (t2 - t1),
                  "prefill_cpu": len(prompt) / (c1 - c0), "decode_cpu": n_gen / (c2 - c1),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_as_isa(isa: str | None) -> str:
    """--isa, for the children: avx2 / avxvnni run colibri as on a CPU without AVX-512 (COLI_CPU_ISA: its kernel
    choice at load runs as it would there) and llama.cpp built without AVX-512, where scripts/test.sh installed
    one (.venv/reference-avx2, or the folder COLI_LLAMA_AVX2 names: bench/README.md); scalar and avx512 force
    colibri's set (llama.cpp keeps its build's). Returns a line saying what runs."""
    if not isa:
        return ""
    if isa in ("avx2", "avxvnni"):
        os.environ["COLI_CPU_ISA"] = isa
        peer = os.environ.get("COLI_LLAMA_AVX2") or os.path.join(ROOT, ".venv", "reference-avx2")
        if os.path.isfile(os.path.join(peer, "llama_cpp", "__init__.py")):
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [peer, os.environ.get("PYTHONPATH")]))
            return f"colibri as on an {isa} CPU (COLI_CPU_ISA={isa}); llama.cpp built for AVX2 ({peer})"
        return (f"colibri as on an {isa} CPU (COLI_CPU_ISA={isa}); llama.cpp keeps its own build "
                f"(no AVX2-only build at {peer}: ./scripts/test.sh installs one on AVX-512 machines)")
    os.environ["COLI_BENCH_ISA"] = isa
    return f"colibri forced to its {isa} kernels; llama.cpp keeps its own build"


def run_child(engine: str, args) -> dict:
    cmd = [sys.executable, "-c", CHILD, engine, args.model, str(args.threads), str(args.prompt_tokens),
           str(args.gen_tokens), str(args.ctx), ROOT]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"{engine} run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="GGUF file (default: the embedded default model)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--isa", choices=("scalar", "avx2", "avxvnni", "avx512"), default=None,
                    help="avx2 / avxvnni: both engines as on a CPU without AVX-512 (run_as_isa); scalar / avx512: "
                         "force colibri's kernels")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    isa_line = run_as_isa(args.isa)
    if isa_line:
        print(isa_line, file=sys.stderr)
    if args.model is None:
        from colibri.models import default_model_path

        args.model = str(default_model_path())
    results: dict[str, list[dict]] = {"colibri": [], "llama.cpp": []}
    t0 = time.time()
    for rep in range(args.reps):
        for engine in ("colibri", "llama.cpp"):
            r = run_child(engine, args)
            results[engine].append(r)
            print(f"[rep {rep + 1}/{args.reps}] {engine:10s} prefill {r['prefill']:8.1f} tok/s  "
                  f"decode {r['decode']:7.1f} tok/s  rss {r['rss_mb']:7.1f} MiB", file=sys.stderr, flush=True)
    keys = ("prefill", "decode", "rss_mb", "prefill_cpu", "decode_cpu")
    med = {e: {k: statistics.median(r[k] for r in rs) for k in keys} for e, rs in results.items()}
    print(f"\nmodel {os.path.basename(args.model)}, {args.threads} threads, {args.reps} interleaved reps, "
          f"{args.prompt_tokens}-token prompt, {args.gen_tokens} generated ({time.time() - t0:.0f} s)"
          + (f"; {isa_line}" if isa_line else ""))
    print(f"{'':12s}{'prefill tok/s':>15s}{'decode tok/s':>15s}{'peak RSS MiB':>15s}")
    for e in ("colibri", "llama.cpp"):
        print(f"{e:12s}{med[e]['prefill']:15.1f}{med[e]['decode']:15.1f}{med[e]['rss_mb']:15.1f}")
    ratio = {k: med["colibri"][k] / med["llama.cpp"][k] for k in keys}
    print(f"{'ratio':12s}{ratio['prefill']:15.2f}x{ratio['decode']:14.2f}x{ratio['rss_mb']:14.2f}x")
    print("per core-second (CPU time; at --threads 1 this is immune to other load):")
    for e in ("colibri", "llama.cpp"):
        print(f"{e:12s}{med[e]['prefill_cpu']:15.1f}{med[e]['decode_cpu']:15.1f}")
    print(f"{'ratio':12s}{ratio['prefill_cpu']:15.2f}x{ratio['decode_cpu']:14.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "median": med, "ratio": ratio, "runs": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
