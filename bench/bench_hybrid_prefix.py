"""Prefix reuse for a Gated DeltaNet hybrid (issue #20 item 2): a coding agent's second turn on a 16k-token
shared prefix. A tiny qwen35moe fixture trained to a 32k context (tests/fixtures/moe_models.py tiny, Q8_0,
n_ctx_train 32768) serves turn 1 (a PREFIX-token prompt, then a short reply) and turn 2 (turn 1's prompt, the
reply re-rendered with a different end, a new message of TAIL tokens) on one slot. Reported per turn: prompt
tokens, tokens taken from the cache, tokens evaluated, prefill seconds (the slot's forward passes, wall) and
process CPU seconds of the whole submit..first token. The target: turn 2's evaluated tokens and time <= 10% of
turn 1's. With --no-checkpoints (COLI_RS_CHECKPOINTS=0) the state cannot rewind and turn 2 runs from 0
(llama.cpp #21831's "forcing full prompt re-processing"), for comparison. With --branch-back N turn 2 keeps
only turn 1's first PREFIX - N tokens (an edit inside the last message): the interval checkpoint at or before
the branch serves it (COLI_RS_CHECKPOINT_EVERY, 512 by default).

    python bench/bench_hybrid_prefix.py [--prefix 16384] [--tail 200] [--reps 3] [--threads 2] [--no-checkpoints]
                                        [--branch-back N]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "sidecar"))
from tests.fixtures import moe_models as mm  # noqa: E402


def turn(e, prompt: list[int], n_gen: int) -> dict:
    c0, w0 = time.process_time(), time.perf_counter()
    reused = e.submit(0, prompt, max_tokens=n_gen, ignore_eos=True)
    out: list[int] = []
    first_cpu = first_wall = None
    while True:
        evs = e.step()
        toks = [ev.token for ev in evs if ev.token >= 0]
        if toks and first_cpu is None:
            first_cpu, first_wall = time.process_time() - c0, time.perf_counter() - w0
        out += toks
        if any(ev.done for ev in evs):
            break
    st = e.slot_status(0)
    return dict(n_prompt=len(prompt), reused=reused, evaluated=len(prompt) - reused, prefill_s=st["prefill_s"],
                to_first_token_wall_s=first_wall, to_first_token_cpu_s=first_cpu, reply=out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", type=int, default=16384)
    ap.add_argument("--tail", type=int, default=200, help="turn 2's new tokens after the shared prefix")
    ap.add_argument("--reply", type=int, default=32, help="turn 1's generated tokens")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-checkpoints", action="store_true")
    ap.add_argument("--branch-back", type=int, default=0, help="turn 2 branches off N tokens before turn 1's end")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.no_checkpoints:
        os.environ["COLI_RS_CHECKPOINTS"] = "0"
    import numpy as np

    from colibri.engine import Engine

    path = mm.tiny("qwen35moe", "Q8_0", n_ctx_train=32768)
    n_ctx = a.prefix + a.reply + a.tail + 64
    rows = []
    with Engine(path, n_slots=1, n_ctx=n_ctx, n_batch=512, n_threads=a.threads) as e:
        for rep in range(a.reps):
            rng = np.random.default_rng(100 + rep)
            t1 = [e.bos] + [int(t) for t in rng.integers(0, e.n_vocab, a.prefix - 1)]
            r1 = turn(e, t1, a.reply)
            # the reply as the next prompt renders it: its last quarter differs, then the new message
            keep = r1["reply"][: a.reply * 3 // 4]
            new = [int(t) for t in rng.integers(0, e.n_vocab, a.tail)]
            t2 = t1[: a.prefix - a.branch_back] + new if a.branch_back else t1 + keep + new
            r2 = turn(e, t2, 8)
            rows.append((r1, r2))
            print(f"rep {rep}: turn 1 {r1['evaluated']} tokens {r1['prefill_s']:.2f} s; turn 2 {r2['evaluated']} "
                  f"tokens ({r2['reused']} reused) {r2['prefill_s']:.3f} s", flush=True)
    med = lambda k, i: statistics.median(r[i][k] for r in rows)  # noqa: E731
    res = dict(prefix=a.prefix, tail=a.tail, branch_back=a.branch_back, checkpoints=not a.no_checkpoints, threads=a.threads,
               turn1=dict(evaluated=med("evaluated", 0), prefill_s=med("prefill_s", 0),
                          first_token_cpu_s=med("to_first_token_cpu_s", 0)),
               turn2=dict(evaluated=med("evaluated", 1), reused=med("reused", 1), prefill_s=med("prefill_s", 1),
                          first_token_cpu_s=med("to_first_token_cpu_s", 1)))
    res["tokens_ratio"] = res["turn2"]["evaluated"] / res["turn1"]["evaluated"]
    res["time_ratio"] = res["turn2"]["prefill_s"] / res["turn1"]["prefill_s"]
    print(json.dumps(res, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
