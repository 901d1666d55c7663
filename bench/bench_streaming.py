"""Expert streaming under a memory cap: colibri with an expert budget of about
a third of the routed-expert bytes, against llama.cpp on the same file with
the same cap, cold (the file dropped from the page cache) and warm (a second
run: colibri pins the experts its first run found hottest).

The cap is a cgroup memory limit (v2 `memory.max`, else v1
`memory.limit_in_bytes`) on each child process, page cache included: the
dense part, the KV cache, the expert budget and a margin for the runtime.
Without a writable cgroup the run stops and says so. llama.cpp runs with its
weights in the file mapping (its --no-repack: repacking copies every Q4_0
weight into anonymous memory, which no cap below the file size survives).

    python bench/bench_streaming.py [--arch qwen3moe] [--quant Q4_0] [--threads 2]
                                    [--tokens 48] [--budget-frac 0.33] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = list(range(5, 37))  # 32 prompt tokens

COLIBRI_CHILD = r"""
import json, sys, time
from colibri.engine import Engine
from colibri.serving.engine_thread import load_heat, save_heat
path, cache, pin, threads, n_tok, heat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
t0 = time.perf_counter()
e = Engine(path, n_ctx=256, n_threads=threads, expert_cache_bytes=cache, expert_pin_bytes=pin)
st = e.stats()
base = load_heat(__import__("pathlib").Path(heat), st["n_layer"], st["n_expert"])
pinned = e.pin_experts(base) if base else 0
load_s = time.perf_counter() - t0
prompt = [e.bos] + PROMPT
e.submit(0, prompt, max_tokens=n_tok, ignore_eos=True)
t0 = time.perf_counter(); times = []
while True:
    evs = e.step()
    times.append(time.perf_counter())
    if any(ev.done for ev in evs): break
s = e.stats(arrays=True)
turn = e.turns()[-1]
save_heat(__import__("pathlib").Path(heat), s["n_layer"], s["n_expert"],
          [a + b for a, b in zip(s["counts"], base or [0] * len(s["counts"]))])
decode = (len(times) - 2) / (times[-1] - times[1]) if len(times) > 2 else 0.0
print(json.dumps({"load_s": load_s, "pinned": pinned, "prefill_s": times[0] - t0, "decode_tok_s": decode,
                  "hits": s["hits"], "misses": s["misses"], "predicted": s["predicted"],
                  "predicted_right": s["predicted_right"], "bytes_read": s["bytes_read"],
                  "tokens": s["tokens_generated"] + s["tokens_prompt"], "turn": turn}))
""".replace("PROMPT", repr(PROMPT))

LLAMA_CHILD = r"""
import json, sys, time
import llama_cpp.llama_cpp as lc
_defaults = lc.llama_model_default_params
def _no_repack():  # llama.cpp's --no-repack: weights stay in the mapping instead of an anonymous copy
    p = _defaults(); p.use_extra_bufts = False; return p
lc.llama_model_default_params = _no_repack
from llama_cpp import Llama
path, threads, n_tok = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
m = Llama(path, n_ctx=256, n_threads=threads, n_batch=64, verbose=False, use_mmap=True)
load_s = time.perf_counter() - t0
prompt = [m.token_bos()] + PROMPT
t0 = time.perf_counter(); times = []
for tok in m.generate(prompt, temp=0):
    times.append(time.perf_counter())
    if len(times) >= n_tok: break
decode = (len(times) - 2) / (times[-1] - times[1]) if len(times) > 2 else 0.0
print(json.dumps({"load_s": load_s, "prefill_s": times[0] - t0, "decode_tok_s": decode}))
""".replace("PROMPT", repr(PROMPT))


def make_cgroup(limit: int) -> tuple[Path, str]:
    """A fresh memory cgroup limited to `limit` bytes: (its folder, the file holding pids)."""
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").exists() and "memory" in (v2 / "cgroup.controllers").read_text():
        cg = v2 / f"colibri-bench-{os.getpid()}"
        cg.mkdir()
        (cg / "memory.max").write_text(str(limit))
        (cg / "memory.swap.max").write_text("0")
        return cg, "cgroup.procs"
    v1 = Path("/sys/fs/cgroup/memory")
    cg = v1 / f"colibri-bench-{os.getpid()}"
    cg.mkdir()
    (cg / "memory.limit_in_bytes").write_text(str(limit))
    return cg, "cgroup.procs"


def run_capped(cg: Path, procs: str, code: str, args: list[str]) -> dict:
    """The child joins the cgroup before Python starts, so all its memory counts."""
    cmd = ["sh", "-c", f'echo $$ > {cg / procs} && exec "$0" "$@"', sys.executable, "-c", code, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600)
    if r.returncode != 0:
        return {"failed": (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit {r.returncode}"]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def drop_file_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="qwen3moe")
    ap.add_argument("--quant", default="Q4_0")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--budget-frac", type=float, default=0.33)
    ap.add_argument("--runtime-mb", type=int, default=400, help="room for the interpreter and libraries")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    from colibri.plan import make_plan, human
    from tests.fixtures import moe_models

    path = str(moe_models.bench_size(args.arch, args.quant))
    plan = make_plan(path, ctx=256)
    budget = int(plan.expert_bytes * args.budget_frac)
    cache, pin = budget * 3 // 4, budget // 4
    limit = plan.dense_bytes + plan.kv_bytes_per_slot + budget + args.runtime_mb * (1 << 20)
    print(f"{os.path.basename(path)}: dense {human(plan.dense_bytes)}, experts {human(plan.expert_bytes)}, "
          f"budget {human(budget)} ({human(cache)} cache + {human(pin)} pinned), cap {human(limit)}", file=sys.stderr)
    try:
        cg, procs = make_cgroup(limit)
    except OSError as e:
        print(f"no writable memory cgroup here ({e}); run as root on a machine with cgroups", file=sys.stderr)
        return 2
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        heat = os.path.join(tmp, "bench.heat")
        try:
            for phase in ("cold", "warm"):
                if phase == "cold":
                    drop_file_cache(path)
                for engine in ("colibri", "llama.cpp"):
                    if phase == "cold":
                        drop_file_cache(path)
                    print(f"  {phase} {engine} ...", file=sys.stderr, flush=True)
                    if engine == "colibri":
                        r = run_capped(cg, procs, COLIBRI_CHILD,
                                       [path, str(cache), str(pin), str(args.threads), str(args.tokens), heat])
                    else:
                        r = run_capped(cg, procs, LLAMA_CHILD, [path, str(args.threads), str(args.tokens)])
                    results[f"{phase} {engine}"] = r
                    print(f"    {r}", file=sys.stderr)
        finally:
            cg.rmdir()
    print(f"{'run':<18} {'decode tok/s':>12} {'prefill s':>10}")
    for name, r in results.items():
        print(f"{name:<18} {r.get('decode_tok_s', 0):>12.2f} {r.get('prefill_s', 0):>10.2f}")
    for phase in ("cold", "warm"):
        a, b = results[f"{phase} colibri"], results[f"{phase} llama.cpp"]
        if a.get("decode_tok_s") and b.get("decode_tok_s"):
            print(f"{phase}: colibri / llama.cpp decode = {a['decode_tok_s'] / b['decode_tok_s']:.2f}x")
        if "hits" in a:
            chosen = a["hits"] + a["misses"]
            print(f"{phase}: cache hit rate {a['hits'] / max(chosen, 1):.2f}, prefetch prediction "
                  f"{a['predicted_right'] / max(a['predicted'], 1):.2f}, read {human(a['bytes_read'] / max(a['tokens'], 1))}"
                  f"/token, pinned {a['pinned']}")
            t = a["turn"]
            print(f"{phase}: phases wall {t['wall_s']:.2f}s = io wait {t['io_wait_s']:.2f} + matmul {t['matmul_s']:.2f}"
                  f" + attention {t['attention_s']:.2f} + lm head {t['lm_head_s']:.2f} + other {t['other_s']:.2f}"
                  f" (disk service {t['disk_s']:.2f}s over the I/O threads)")
    if args.json:
        Path(args.json).write_text(json.dumps({"limit": limit, "budget": budget, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
