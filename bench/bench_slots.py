"""Aggregate decode speed with several KV slots decoding together: tok/s of all
slots combined with 1, 2, 4, 8 active conversations, on the default model and
on the benchmark-size MoE fixture (tests/fixtures/moe_models.py, generated on
first use). Each slot gets its own 32-token prompt; once every prompt is
prefilled, `--steps` decode steps are timed. Repetitions interleave the slot
counts; the table shows medians and the speed-up over one slot.

    python bench/bench_slots.py [--models default,moe] [--slots 1,2,4,8] [--threads 2]
                                [--steps 32] [--reps 3] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from colibri.engine import Engine  # noqa: E402
from colibri.models import default_model_path  # noqa: E402


def model_file(name: str) -> str:
    if name == "default":
        return str(default_model_path())
    from tests.fixtures import moe_models
    arch, _, quant = (name.split(":", 1)[1] if ":" in name else "qwen3moe:Q4_0").partition(":")
    return str(moe_models.bench_size(arch, quant or "Q4_0"))


def decode_rate(e: Engine, n: int, steps: int, seed: int, clock=time.perf_counter) -> float:
    """tok/s of n slots decoding together, timed after every prompt is in."""
    vocab = min(e.n_vocab, 1000)
    for s in range(n):
        prompt = [e.bos] + [(seed * 7919 + s * 104729 + i * 31) % (vocab - 10) + 5 for i in range(31)]
        e.submit(s, prompt, max_tokens=steps + 8, ignore_eos=True)
    while any(e.slot_status(s)["state"] == "prefill" for s in range(n)):
        e.step()
    e.step()  # the first decode step of the last slot to finish its prefill
    t0 = clock()
    made = 0
    for _ in range(steps):
        made += sum(1 for ev in e.step() if not ev.done)
    dt = clock() - t0
    for s in range(n):
        e.cancel(s)
    while e.step():
        pass
    return made / dt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="default,moe", help="default, moe or moe:ARCH:QUANT (comma-separated)")
    ap.add_argument("--slots", default="1,2,4,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpu-time", action="store_true",
                    help="rates from the process's CPU time instead of wall time (robust on a busy machine; "
                         "use with --threads 1)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.slots.split(",")]
    results = {}
    for name in args.models.split(","):
        path = model_file(name)
        print(f"== {name}: {os.path.basename(path)}, {args.threads} threads", file=sys.stderr)
        rates: dict[int, list[float]] = {n: [] for n in counts}
        with Engine(path, n_slots=max(counts), n_ctx=256, n_threads=args.threads) as e:
            decode_rate(e, 1, 4, 0)  # warm the page cache and the pool
            for rep in range(args.reps):
                order = counts if rep % 2 == 0 else counts[::-1]
                for n in order:
                    rates[n].append(decode_rate(e, n, args.steps, rep,
                                                time.process_time if args.cpu_time else time.perf_counter))
                    print(f"  rep {rep + 1}/{args.reps}: {n} slots {rates[n][-1]:.1f} tok/s", file=sys.stderr)
        med = {n: statistics.median(v) for n, v in rates.items()}
        results[name] = {"file": os.path.basename(path), "tok_s": med, "speedup": {n: med[n] / med[counts[0]] for n in counts}}
    print(f"{'model':<10} {'slots':>5} {'tok/s':>8} {'x 1 slot':>9}")
    for name, r in results.items():
        for n in counts:
            print(f"{name:<10} {n:>5} {r['tok_s'][n]:>8.1f} {r['speedup'][n]:>8.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
