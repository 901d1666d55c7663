"""Decode speed across the context: colibri against llama.cpp (flash attention
on) on the same GGUF file, after a prompt of 256 .. 32k tokens.

Each point is a fresh child process per engine (colibri, then llama.cpp, then
the next round: interleaved, so machine noise hits both alike). A child fills
the cache with the prompt (the default model's bundled text, repeated), then
decodes --gen greedy tokens and reports decode tok/s in process CPU time
(both threads' seconds) and as 1 / the median token's wall time (robust to a
preempted step: llama.cpp's threads spin, so on shared cores a step can take
10-100x longer and its CPU time counts the spinning), plus the
resident set the prompt added (after its first token, which maps the weights in). Medians and the ratio llama.cpp_time / ours
(> 1: colibri faster) per context:

    python bench/bench_context.py [--model M] [--threads 2] [--reps 3] [--contexts 256,1024,...] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, sys, time
engine, model, threads, n_prompt, n_gen, ctx = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
sys.path.insert(0, sys.argv[7])
from tests.reference import real_text
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1]) / 1024
steps = []  # wall seconds of each decoded token: their median shrugs off a preempted step
if engine == "colibri":
    from colibri import kernel_choice
    from colibri.engine import Engine
    kernel_choice.choose(model)  # the kernel sets and prefetch level a load picks
    e = Engine(model, n_ctx=ctx, n_threads=threads)
    text = real_text(); toks = e.tokenize(text)
    while len(toks) < n_prompt: toks += e.tokenize(text, add_bos=False)
    prompt = toks[:n_prompt]
    e.eval(prompt[:1], 0); rss0 = rss_mb()  # the weights' pages a row touches are in
    t0 = time.perf_counter(); e.eval(prompt[1:], 1); t1 = time.perf_counter()
    rss1 = rss_mb()
    pos = len(prompt)
    c0 = time.process_time(); t2 = time.perf_counter()
    for _ in range(n_gen):
        a = time.perf_counter(); tok, _ = e.sample(); e.eval([tok], pos); pos += 1; steps.append(time.perf_counter() - a)
    t3 = time.perf_counter(); c1 = time.process_time()
else:
    import numpy as np, llama_cpp
    m = llama_cpp.Llama(model_path=model, n_ctx=ctx, n_threads=threads, n_threads_batch=threads, n_batch=512,
                        logits_all=False, verbose=False, flash_attn=os.environ.get("COLI_BENCH_FLASH_ATTN", "1") == "1")
    text = real_text(); toks = m.tokenize(text.encode(), add_bos=True)
    while len(toks) < n_prompt: toks += m.tokenize(text.encode(), add_bos=False)
    prompt = toks[:n_prompt]
    m.eval(prompt[:1]); rss0 = rss_mb()
    t0 = time.perf_counter(); m.eval(prompt[1:]); t1 = time.perf_counter()
    rss1 = rss_mb()
    c0 = time.process_time(); t2 = time.perf_counter()
    for _ in range(n_gen):
        a = time.perf_counter()
        tok = int(np.argmax(np.ctypeslib.as_array(m._ctx.get_logits(), shape=(m.n_vocab(),)))); m.eval([tok])
        steps.append(time.perf_counter() - a)
    t3 = time.perf_counter(); c1 = time.process_time()
steps.sort()
print(json.dumps({"prefill": len(prompt) / (t1 - t0), "decode": n_gen / (t3 - t2), "decode_cpu": n_gen / (c1 - c0),
                  "decode_med": 1 / steps[len(steps) // 2],
                  "rss_before_mb": rss0, "rss_after_mb": rss1}))
"""

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_child(engine: str, model: str, threads: int, n_prompt: int, n_gen: int, ctx: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "sidecar"))
    out = subprocess.run([sys.executable, "-c", CHILD, engine, model, str(threads), str(n_prompt), str(n_gen), str(ctx),
                          ROOT], capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{engine} child failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def default_model() -> str:
    sys.path.insert(0, os.path.join(ROOT, "sidecar"))
    os.environ.setdefault("COLI_DEFAULT_MODEL", "gemma-3-270m")
    from colibri.models import embedded_model_path

    return str(embedded_model_path(progress=False))


def with_context_length(model: str, n: int) -> str:
    """A copy of model beside it whose <arch>.context_length is n (the synthetic bench files are trained on 4096;
    the weights do not care): the key's uint32 patched in place in the copy, made once."""
    import mmap
    import shutil
    import struct
    base, ext = os.path.splitext(model)
    out = f"{base}-ctx{n}{ext}"
    if os.path.exists(out):
        return out
    tmp = out + ".tmp"
    shutil.copyfile(model, tmp)
    with open(tmp, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        head = m[:1 << 20]
        at = head.find(b".context_length")
        if at < 0 or struct.unpack("<I", head[at + 15:at + 19])[0] != 4:  # GGUF_TYPE_UINT32
            raise SystemExit(f"{model}: no uint32 context_length key to patch")
        m[at + 19:at + 23] = struct.pack("<I", n)
    os.replace(tmp, out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="GGUF file (default: the tests' Gemma 3 270M)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--gen", type=int, default=32, help="decoded tokens per run")
    ap.add_argument("--contexts", default="256,1024,4096,8192,16384,32768")
    ap.add_argument("--ctx", type=int, default=0, help="--ctx of both engines (default: the prompt + --gen, rounded up)")
    ap.add_argument("--json", help="write the raw runs here")
    ap.add_argument("--context-length", type=int, default=0,
                    help="bench a copy of --model whose trained context is this (e.g. 32768 for the 4096-token "
                         "synthetic bench files: bench_moe.py's qwen35moe / qwen3moe at 16k)")
    args = ap.parse_args()
    model = args.model or default_model()
    if args.context_length:
        model = with_context_length(model, args.context_length)
    sys.path.insert(0, os.path.join(ROOT, "sidecar"))
    from colibri.engine import GGUFFile

    with GGUFFile(model) as g:  # neither engine goes past the trained length
        train = int(g.get(f"{g.get('general.architecture')}.context_length"))
    points = [min(int(x), train - args.gen) for x in args.contexts.split(",")]
    raw: dict = {}
    print(f"model {os.path.basename(model)}, {args.threads} threads, {args.gen} decoded tokens, {args.reps} rounds")
    print("tok/s: decoded tokens per CPU-second of the process (both threads), and 1 / the median token's wall time")
    print(f"{'prompt':>7} {'colibri cpu':>12} {'llama.cpp FA':>13} {'ratio':>6} {'colibri med':>12} {'llama med':>10} "
          f"{'ratio':>6} {'coli RSS+':>9} {'llama RSS+':>10}")
    for n in points:
        ctx = min(args.ctx or (n + args.gen + 255) // 256 * 256, train)
        runs = {"colibri": [], "llama": []}
        for _ in range(args.reps):
            for eng in ("colibri", "llama"):
                runs[eng].append(run_child(eng, model, args.threads, n, args.gen, ctx))
        raw[n] = runs
        med = {e: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for e, rs in runs.items()}
        c, l = med["colibri"], med["llama"]
        print(f"{n:>7} {c['decode_cpu']:>12.1f} {l['decode_cpu']:>13.1f} {c['decode_cpu'] / l['decode_cpu']:>5.2f}x "
              f"{c['decode_med']:>12.1f} {l['decode_med']:>10.1f} {c['decode_med'] / l['decode_med']:>5.2f}x "
              f"{c['rss_after_mb'] - c['rss_before_mb']:>8.0f}M "
              f"{l['rss_after_mb'] - l['rss_before_mb']:>9.0f}M", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
