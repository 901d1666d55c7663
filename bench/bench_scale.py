"""Streaming at real scale (issue #44): a 12-20 GB MoE file (bench/scale_models.py) under cgroup memory caps
of 4 and 8 GiB and uncapped, from a cold page cache, colibri with no flags against llama.cpp on the same
file, and the disk's own bandwidth measured in the same run.

Per run: time to first token (load + prefill + one token, from the engine's open), decode tok/s over
--tokens tokens sampled at temperature 1 (greedy decoding of a random model repeats itself, which no
cache should be judged by), bytes read from disk per decoded token (the process's /proc/self/io:
page faults on a mapping count as reads too), colibri's expert-cache hit rate, the longest decode
step once warm (after 8 steps), the cgroup's peak memory (page cache included) and whether the cap
killed it. Share of the disk = tok/s x bytes/token / the random-read bandwidth at expert-sized reads.

colibri runs as `coli generate` does (colibri.plan.open_planned, no placement flags; extra variants
set COLI_* variables: `--variants lru:COLI_EXPERT_POLICY=lru,dio:COLI_DIRECT_IO=1`). llama.cpp runs
with its defaults (mmap, and its CPU repack of the weights into anonymous memory); where the cap
kills that, it runs again with --no-repack (use_extra_bufts off: the weights stay in the mapping),
and both are reported. Needs root (a cgroup v1 or v2 memory controller, and dropping the file's
pages). The file's pages are dropped before each run; runs alternate engines.

    python bench/bench_scale.py [--shapes qwen3-30b-a3b] [--routing skewed] [--caps 4,8,0]
        [--tokens 64] [--reps 1] [--variants NAME:VAR=VALUE,...] [--json out.json] [--plot out.png]
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_capped import cpu_name  # noqa: E402
from bench_streaming import ROOT, drop_file_cache  # noqa: E402

import scale_models  # noqa: E402

GIB = 1 << 30
WARM_STEPS = 8  # decode steps before the stall measure starts

CHILD_COMMON = r"""
import json, os, sys, time
def io_read():
    for line in open("/proc/self/io"):
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0
path, n_tok, prompt = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
out = {}
"""

COLIBRI_CHILD = CHILD_COMMON + r"""
from colibri.cli import build_parser
from colibri.cli_options import placement_from_args
from colibri.plan import open_planned
args = build_parser().parse_args(["generate", "-m", path, "-p", "x", "-n", str(n_tok)])  # no placement flags
t0 = time.perf_counter()
e, plan = open_planned(path, placement_from_args(args), ctx=args.ctx, threads=args.threads,
                       kv_tokens=len(prompt) + n_tok + 2)
out["load_s"] = time.perf_counter() - t0
out["placement"] = plan.placement
out["cache_gib"] = plan.cache_bytes / 2**30
out["threads"] = plan.threads
e.seed(1)
t1 = time.perf_counter()
e.eval(prompt, 0)
tok, _ = e.sample(1.0)
now = time.perf_counter()
out["prefill_s"] = now - t1
out["ttft_s"] = now - t0
io1, s1 = io_read(), e.stats()
steps = []
pos = len(prompt)
for _ in range(n_tok - 1):
    a = time.perf_counter()
    e.eval([tok], pos)
    tok, _ = e.sample(1.0)
    steps.append(time.perf_counter() - a)
    pos += 1
io2, s2 = io_read(), e.stats()
out["decode_tok_s"] = len(steps) / sum(steps)
out["steps"] = steps
out["bytes_per_token"] = (io2 - io1) / len(steps)
d = {k: s2[k] - s1[k] for k in ("hits", "misses", "loads", "prefetch_issued", "prefetch_used", "bytes_read",
                                 "io_wait_s", "predicted", "predicted_right")}
chosen = d["hits"] + d["misses"]
# in RAM before the step needed it: the chosen experts not read for this step (on demand or ahead)
read_for_chosen = d["loads"] - (d["prefetch_issued"] - d["prefetch_used"])
out["hit_rate"] = 1 - read_for_chosen / chosen if chosen else None
out["ready_rate"] = d["hits"] / chosen if chosen else None  # ready when acquired (cached or read ahead in time)
out["store_bytes_per_token"] = d["bytes_read"] / len(steps)
out["io_wait_s_per_token"] = d["io_wait_s"] / len(steps)
out["prefetch_wasted"] = (d["prefetch_issued"] - d["prefetch_used"]) / max(d["prefetch_issued"], 1)
out["predicted_right"] = d["predicted_right"] / max(d["predicted"], 1)
print(json.dumps(out))
"""

LLAMA_CHILD = CHILD_COMMON + r"""
repack = sys.argv[4] == "1"
import llama_cpp.llama_cpp as lc
if not repack:  # llama.cpp's --no-repack: the weights stay in the file mapping
    _defaults = lc.llama_model_default_params
    def _no_repack():
        p = _defaults(); p.use_extra_bufts = False; return p
    lc.llama_model_default_params = _no_repack
from llama_cpp import Llama
threads = int(os.environ.get("COLI_BENCH_THREADS") or os.cpu_count())
t0 = time.perf_counter()
m = Llama(path, n_ctx=len(prompt) + n_tok + 8, n_threads=threads, n_threads_batch=threads, verbose=False, seed=1)
out["load_s"] = time.perf_counter() - t0
out["threads"] = threads
t1 = time.perf_counter()
times = []
io1 = None
for tok in m.generate(prompt, temp=1.0, top_k=0, top_p=1.0, min_p=0.0):
    times.append(time.perf_counter())
    if io1 is None:
        io1 = io_read()
        out["prefill_s"] = times[0] - t1
        out["ttft_s"] = times[0] - t0
    if len(times) >= n_tok:
        break
io2 = io_read()
steps = [b - a for a, b in zip(times, times[1:])]
out["decode_tok_s"] = len(steps) / sum(steps)
out["steps"] = steps
out["bytes_per_token"] = (io2 - io1) / len(steps)
print(json.dumps(out))
"""


# ---- the cgroup ------------------------------------------------------------------------------------------

class Cgroup:
    """A memory cgroup for one child at a time: its limit, its peak (page cache included), its OOM kills."""

    def __init__(self, name: str):
        v2 = Path("/sys/fs/cgroup")
        self.v2 = (v2 / "cgroup.controllers").exists() and "memory" in (v2 / "cgroup.controllers").read_text()
        self.path = (v2 if self.v2 else v2 / "memory") / name
        self.path.mkdir(exist_ok=True)

    def set_limit(self, limit: int | None) -> None:
        if self.v2:
            (self.path / "memory.max").write_text(str(limit) if limit else "max")
            (self.path / "memory.swap.max").write_text("0")
        else:
            (self.path / "memory.limit_in_bytes").write_text(str(limit) if limit else "-1")
            (self.path / "memory.max_usage_in_bytes").write_text("0")

    def peak(self) -> int | None:
        f = self.path / ("memory.peak" if self.v2 else "memory.max_usage_in_bytes")
        return int(f.read_text()) if f.exists() else None

    def oom_kills(self) -> int:
        f = self.path / ("memory.events" if self.v2 else "memory.oom_control")
        for line in f.read_text().splitlines() if f.exists() else ():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def run(self, argv: list[str], env: dict) -> subprocess.CompletedProcess:
        cmd = ["sh", "-c", f'echo $$ > {self.path / "cgroup.procs"} && exec "$0" "$@"', *argv]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=7200, env=env)

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass


# ---- the disk --------------------------------------------------------------------------------------------

def disk_bandwidth(path: Path, expert_bytes: int, threads: int = 4, seconds: float = 6.0) -> dict:
    """Sequential (4 MiB) and random (one expert matrix, `threads` in parallel as colibri's I/O threads)
    read bandwidth of the file's disk, O_DIRECT (no page cache), in GB/s."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    size = os.fstat(fd).st_size
    align = 4096
    try:
        buf = mmap.mmap(-1, 4 << 20)
        t0, done, off = time.perf_counter(), 0, (size // 3) // align * align
        while time.perf_counter() - t0 < seconds / 2 and off + len(buf) <= size:
            done += os.preadv(fd, [buf], off)
            off += len(buf)
        seq = done / (time.perf_counter() - t0)
        chunk = (expert_bytes + align - 1) // align * align
        total = [0]
        stop = time.perf_counter() + seconds / 2
        lock = threading.Lock()

        def worker(seed: int) -> None:
            rng, b, n = random.Random(seed), mmap.mmap(-1, chunk), 0
            while time.perf_counter() < stop:
                n += os.preadv(fd, [b], rng.randrange(0, (size - chunk) // align) * align)
            with lock:
                total[0] += n

        t0 = time.perf_counter()
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        rnd = total[0] / (time.perf_counter() - t0)
    finally:
        os.close(fd)
    return {"seq_gb_s": seq / 1e9, "random_gb_s": rnd / 1e9, "random_read_bytes": chunk, "threads": threads}


# ---- runs ------------------------------------------------------------------------------------------------

def run_one(cg: Cgroup, engine: str, path: Path, tokens: int, prompt: list[int], cap: int | None,
            env_extra: dict, repack: bool = True) -> dict:
    os.sync()
    drop_file_cache(str(path))
    cg.set_limit(cap)
    kills0 = cg.oom_kills()
    env = {**os.environ, **env_extra,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "sidecar"), os.environ.get("PYTHONPATH", "")])}
    code = COLIBRI_CHILD if engine == "colibri" else LLAMA_CHILD
    argv = [sys.executable, "-c", code, str(path), str(tokens), json.dumps(prompt)]
    if engine != "colibri":
        argv.append("1" if repack else "0")
    t0 = time.perf_counter()
    r = cg.run(argv, env)
    out: dict = {"wall_s": time.perf_counter() - t0, "peak_bytes": cg.peak(), "oom_kills": cg.oom_kills() - kills0}
    if r.returncode != 0:
        out["failed"] = f"exit {r.returncode}" + (": " + r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "")
        return out
    out.update(json.loads(r.stdout.strip().splitlines()[-1]))
    steps = out.pop("steps")
    out["max_step_s"] = max(steps[WARM_STEPS:] or steps)
    out["median_step_s"] = statistics.median(steps)
    return out


def summarize(name: str, r: dict, disk: dict) -> str:
    if "failed" in r:
        return f"{name:<28} FAILED ({r['failed']}; oom kills {r['oom_kills']}, peak {gib(r['peak_bytes'])})"
    share = r["decode_tok_s"] * r["bytes_per_token"] / (disk["random_gb_s"] * 1e9)
    hit = f"{100 * r['hit_rate']:.0f}%" if r.get("hit_rate") is not None else "-"
    return (f"{name:<28} ttft {r['ttft_s']:6.1f} s  decode {r['decode_tok_s']:6.2f} tok/s  "
            f"read {r['bytes_per_token'] / 1e6:7.1f} MB/tok  disk {100 * share:3.0f}%  hits {hit:>4}  "
            f"max step {r['max_step_s']:5.2f} s  peak {gib(r['peak_bytes'])}")


def gib(n: int | None) -> str:
    return f"{n / GIB:.2f} GiB" if n else "?"


def plot(results: dict, out: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: `pip install matplotlib` for the plot", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4.2), squeeze=False)
    for ax, (shape, runs) in zip(axes[0], results.items()):
        for engine, style in (("colibri", "o-"), ("llama.cpp", "s--")):
            pts = []
            for cap_gib, by_engine in runs.items():
                r = by_engine.get(engine)
                x = float(cap_gib) if float(cap_gib) else None
                if r and "decode_tok_s" in r and x:
                    pts.append((x, r["decode_tok_s"]))
                elif r and "decode_tok_s" in r:
                    ax.axhline(r["decode_tok_s"], ls=":", color="C0" if engine == "colibri" else "C1",
                               label=f"{engine}, no cap")
            if pts:
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=f"{engine}, capped")
        ax.set_xlabel("memory cap (GiB, RSS + page cache)")
        ax.set_ylabel("decode tok/s")
        ax.set_yscale("log")
        ax.set_title(shape)
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot: {out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="qwen3-30b-a3b", help=f"comma-separated: {', '.join(scale_models.SHAPES)}")
    ap.add_argument("--routing", default="skewed", help="uniform, skewed (scale_models.parse_routing)")
    ap.add_argument("--caps", default="4,8,0", help="GiB, comma-separated; 0: no cap")
    ap.add_argument("--tokens", type=int, default=64, help="tokens generated per run (decode: all but the first)")
    ap.add_argument("--llama-tokens", type=int, default=0, help="tokens for llama.cpp's capped runs (0: --tokens)")
    ap.add_argument("--engines", default="colibri,llama.cpp")
    ap.add_argument("--variants", default="", help="more colibri runs: NAME:VAR=VALUE[;VAR=VALUE],...")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--dir", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--replot", type=Path, nargs="+", metavar="JSON",
                    help="no runs: one plot (--plot) of earlier runs' --json reports, a panel per shape")
    args = ap.parse_args(argv)
    if args.replot:
        reports = [json.loads(p.read_text()) for p in args.replot]
        shapes = {s: v["runs"] for r in reports for s, v in r["shapes"].items()}
        first = reports[0]
        plot(shapes, args.plot or Path("bench_scale.png"),
             f"{first['cpu']}, {first['cores']} cores; {first['routing']} routing; decode over {first['tokens']} tokens")
        return 0

    variants = {"colibri": {}}
    for item in filter(None, args.variants.split(",")):
        name, _, assigns = item.partition(":")
        variants[f"colibri {name}"] = dict(a.split("=", 1) for a in assigns.split(";") if a)
    engines = args.engines.split(",")
    caps = [float(c) for c in args.caps.split(",")]
    cg = Cgroup(f"colibri-scale-{os.getpid()}")
    report: dict = {"cpu": cpu_name(), "cores": os.cpu_count(), "tokens": args.tokens, "routing": args.routing,
                    "shapes": {}, "disk": {}}
    try:
        for shape in args.shapes.split(","):
            path = scale_models.write(shape, args.routing, args.dir)
            cfg = scale_models.config(shape)
            from colibri.plan import make_plan

            plan = make_plan(path, ctx=256)
            expert_matrix = plan.expert_bytes // max(plan.n_expert, 1) // max(plan.moe_layers, 1) // 3
            disk = disk_bandwidth(path, expert_matrix)
            report["disk"][shape] = disk
            print(f"{path.name}: {path.stat().st_size / 1e9:.1f} GB ({plan.dense_bytes / 1e9:.2f} GB dense, "
                  f"{plan.expert_bytes / 1e9:.1f} GB experts, {plan.expert_bytes_per_token / 1e6:.0f} MB of experts "
                  f"per token), routing {scale_models.routing_of(path)}; disk: sequential {disk['seq_gb_s']:.2f} GB/s, "
                  f"random {expert_matrix >> 10} KiB x{disk['threads']} {disk['random_gb_s']:.2f} GB/s; "
                  f"CPU {cpu_name()}", flush=True)
            rng = random.Random(7)
            prompt = [rng.randrange(300, 1200) for _ in range(32)]  # ids of the trained vocabulary
            runs: dict = {}
            report["shapes"][shape] = {"file_bytes": path.stat().st_size, "dense_bytes": plan.dense_bytes,
                                       "expert_bytes": plan.expert_bytes, "arch": cfg.arch, "runs": runs}
            for cap_gib in caps:
                cap = int(cap_gib * GIB) or None
                by_engine = runs.setdefault(str(cap_gib), {})
                for rep in range(args.reps):
                    for engine in engines:
                        todo = list(variants.items()) if engine == "colibri" else [("llama.cpp", None)]
                        for name, env_extra in todo:
                            if engine == "colibri":
                                r = run_one(cg, "colibri", path, args.tokens, prompt, cap, env_extra)
                            else:
                                n = args.llama_tokens if cap and args.llama_tokens else args.tokens
                                r = run_one(cg, "llama.cpp", path, n, prompt, cap, {})
                                if "failed" in r and cap:  # the cap killed its repack: the weights in the mapping
                                    by_engine.setdefault("llama.cpp default", []).append(r)
                                    print("  " + summarize(f"{cap_gib:g} GiB llama.cpp default", r, disk), flush=True)
                                    name = "llama.cpp --no-repack"
                                    r = run_one(cg, "llama.cpp", path, n, prompt, cap, {}, repack=False)
                            by_engine.setdefault(name, []).append(r)
                            print("  " + summarize(f"{cap_gib:g} GiB {name}", r, disk), flush=True)
            # the median rep of each, for the table and the plot
            for by_engine in runs.values():
                for name, reps in list(by_engine.items()):
                    ok = [r for r in reps if "decode_tok_s" in r]
                    by_engine[name] = (sorted(ok, key=lambda r: r["decode_tok_s"])[len(ok) // 2] if ok else reps[-1])
                llama = by_engine.get("llama.cpp --no-repack") or by_engine.get("llama.cpp")
                if llama:
                    by_engine["llama.cpp"] = llama
            for cap_gib, by_engine in runs.items():
                a, b = by_engine.get("colibri", {}), by_engine.get("llama.cpp", {})
                if a.get("decode_tok_s") and b.get("decode_tok_s"):
                    print(f"{shape} cap {cap_gib} GiB: colibri / llama.cpp decode {a['decode_tok_s'] / b['decode_tok_s']:.2f}x, "
                          f"ttft {a['ttft_s'] / b['ttft_s']:.2f}x")
    finally:
        cg.remove()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.plot:
        plot({s: v["runs"] for s, v in report["shapes"].items()}, args.plot,
             f"{report['cpu']}, {report['cores']} cores; {args.routing} routing; decode over {args.tokens} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
