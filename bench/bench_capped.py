"""A container's memory cap with no flags: `coli generate` on the 1.4 GB-class MoE bench file
(tests/fixtures/moe_models.py bench_size, qwen3moe Q4_0: 24 layers, 64 experts top-8) inside a
900 MiB cgroup, against llama.cpp (llama-cpp-python) on the same file in the same cap.

colibri is told nothing: its plan reads the cgroup limit (colibri.container) and streams the
routed experts within it. llama.cpp keeps its weights in the file mapping (use_mmap, and its
--no-repack: a repacked copy is anonymous memory that no cap below the file size survives), so
the cap leaves it a page cache smaller than the file. Each run starts with the file dropped from
the page cache; each child joins the cgroup before Python starts, so all its memory counts.
Decode tok/s is measured after the first generated token. Needs root and a writable cgroup
(v2 with the memory controller, else v1 /sys/fs/cgroup/memory); bench_streaming.py shares its helpers.

    python bench/bench_capped.py [--cap-mib 900] [--threads 2] [--tokens 48] [--reps 2] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_streaming import LLAMA_CHILD, PROMPT, ROOT, drop_file_cache, make_cgroup  # noqa: E402

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "sidecar"))
from colibri.kernel_choice import cpu_model as cpu_name  # noqa: E402
from tests.fixtures import moe_models  # noqa: E402


def in_cgroup(cg: Path, argv: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = ["sh", "-c", f'echo $$ > {cg / "cgroup.procs"} && exec "$0" "$@"', *argv]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600, env=env)


def run_colibri(cg: Path, path: str, threads: int, tokens: int) -> dict:
    """`coli generate` as a user runs it: no placement flags. The prompt is the 32 token ids llama.cpp
    gets, as text the model's tokenizer reads back (a synthetic vocabulary: close, not identical)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "sidecar"), os.environ.get("PYTHONPATH", "")])}
    prompt = " ".join(f"w{t}" for t in PROMPT)
    r = in_cgroup(cg, [sys.executable, "-m", "colibri", "-v", "generate", "-m", path, "-p", prompt, "-n", str(tokens),
                       "--ignore-eos", "--json", "-t", str(threads)], env)
    if r.returncode != 0:
        return {"failed": (r.stderr or r.stdout).strip().splitlines()[-3:]}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    placement = [line.split(": ", 1)[1] for line in r.stderr.splitlines() if "colibri.plan:" in line]
    return {"decode_tok_s": out["tok_per_s"]["decode"], "prefill_tok_s": out["tok_per_s"]["prefill"],
            "tokens": len(out["tokens"]), "plan": placement}


def run_llama(cg: Path, path: str, threads: int, tokens: int) -> dict:
    r = in_cgroup(cg, [sys.executable, "-c", LLAMA_CHILD, path, str(threads), str(tokens)])
    if r.returncode != 0:
        return {"failed": (r.stderr or r.stdout).strip().splitlines()[-3:] or [f"exit {r.returncode}"]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cap-mib", type=int, default=900)
    ap.add_argument("--arch", default="qwen3moe")
    ap.add_argument("--quant", default="Q4_0")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--reps", type=int, default=2, help="runs of each, alternating, each from a cold page cache")
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    path = str(moe_models.bench_size(args.arch, args.quant))
    cap = args.cap_mib << 20
    print(f"{os.path.basename(path)} ({os.path.getsize(path) / 1e9:.2f} GB) in a {args.cap_mib} MiB cgroup, "
          f"{args.threads} threads, {args.tokens} tokens; CPU: {cpu_name()}", file=sys.stderr)
    try:
        cg, _ = make_cgroup(cap)
    except OSError as exc:
        print(f"no writable memory cgroup here ({exc}); run as root on a machine with cgroups", file=sys.stderr)
        return 2
    results: dict[str, list[dict]] = {"colibri": [], "llama.cpp": []}
    try:
        for rep in range(args.reps):
            for name, fn in (("colibri", run_colibri), ("llama.cpp", run_llama)):
                drop_file_cache(path)
                r = fn(cg, path, args.threads, args.tokens)
                results[name].append(r)
                print(f"  {rep + 1}/{args.reps} {name}: {r}", file=sys.stderr, flush=True)
    finally:
        cg.rmdir()
    med = {k: statistics.median([r.get("decode_tok_s", 0.0) for r in v]) for k, v in results.items()}
    print(f"CPU: {cpu_name()}; cap {args.cap_mib} MiB; {args.threads} threads")
    print(f"{'engine':<10} {'decode tok/s (median of ' + str(args.reps) + ')':>32}")
    for k, v in med.items():
        print(f"{k:<10} {v:>32.2f}")
    ratio = med["colibri"] / med["llama.cpp"] if med["llama.cpp"] else float("inf")
    print(f"colibri / llama.cpp decode under the cap: {ratio:.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_name(), "cap": cap, "threads": args.threads,
                                               "results": results, "median": med, "ratio": ratio}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
