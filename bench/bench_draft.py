"""Speculative decoding by prompt lookup (engine/src/draft.h): decode tok/s with up to 0, 2, 4 or 8
drafted tokens per step, verified as the engine's plan chooses from measured step costs (`4`) or every
one found (`4!`), on tasks where the answer copies the prompt (rewriting code it was given) and where it
does not (a question), greedy, through the engine's step loop (what `coli serve` drives). The tokens are
the same in every run (checked); only the speed moves. Each (task, drafts) run is a fresh engine, runs
alternate round by round, medians are printed with the acceptance counters.

    python bench/bench_draft.py --model M [--threads 2] [--reps 3] [--tokens 160] [--drafts=-1,4,4!,8]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "sidecar"), ROOT]

from colibri.engine import Engine  # noqa: E402

CODE = '''def parse_range(text):
    """Parse "a-b" or "a" into a list of ints."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


def format_range(values):
    values = sorted(set(values))
    runs = []
    start = prev = None
    for v in values:
        if start is None:
            start = prev = v
        elif v == prev + 1:
            prev = v
        else:
            runs.append((start, prev))
            start = prev = v
    if start is not None:
        runs.append((start, prev))
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)
'''

TASKS = {
    "edit": "Add type hints to every function in this file and return the whole file, unchanged otherwise:\n\n"
            f"```python\n{CODE}```",
    "question": "Explain in a few paragraphs why the sky is blue, and why sunsets are red.",
}


def chat_prompt(e: Engine, text: str) -> list[int]:
    """ChatML (Qwen) when the vocabulary has it, else the plain text."""
    if e.tokenize("<|im_start|>", add_bos=False, special=True) != e.tokenize("<|im_start|>", add_bos=False):
        return e.tokenize(f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n", add_bos=True, special=True)
    return e.tokenize(text, add_bos=True)


def one_run(model: str, task: str, drafts: str, threads: int, tokens: int) -> dict:
    with Engine(model, n_ctx=2048, n_threads=threads, draft_tokens=int(drafts.rstrip("!")),
                draft_always=drafts.endswith("!")) as e:
        prompt = chat_prompt(e, TASKS[task])
        e.submit(0, prompt, max_tokens=tokens, ignore_eos=True)
        out, t_first, done = [], None, False
        while not done:
            for ev in e.step():
                if ev.token >= 0:
                    out.append(ev.token)
                    if t_first is None:
                        t_first = time.perf_counter()
                done |= ev.done
        t_end = time.perf_counter()
        st = e.stats()
    return {"tok_s": (len(out) - 1) / (t_end - t_first), "tokens": out, "drafted": st["draft_tokens"],
            "accepted": st["draft_accepted"], "steps": st["draft_steps"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=160)
    ap.add_argument("--drafts", default="-1,4,4!,8", help="draft_tokens values; -1: none; N!: verify all")
    ap.add_argument("--tasks", default=",".join(TASKS))
    a = ap.parse_args()
    drafts = a.drafts.split(",")
    tasks = a.tasks.split(",")
    runs: dict[tuple[str, str], list[dict]] = {}
    for rep in range(a.reps):
        for task in tasks:
            for d in drafts:
                r = one_run(a.model, task, d, a.threads, a.tokens)
                runs.setdefault((task, d), []).append(r)
                print(f"  rep {rep + 1} {task:8s} drafts {d:>3s}: {r['tok_s']:6.2f} tok/s", file=sys.stderr, flush=True)
    print(f"{os.path.basename(a.model)}, {a.threads} threads, {a.tokens} tokens greedy, {a.reps} reps (median)")
    for task in tasks:
        base = statistics.median(r["tok_s"] for r in runs[(task, drafts[0])])
        ref = runs[(task, drafts[0])][0]["tokens"]
        for d in drafts:
            rs = runs[(task, d)]
            assert all(r["tokens"] == ref for r in rs), f"{task} drafts {d}: the tokens changed"
            med = statistics.median(r["tok_s"] for r in rs)
            acc = rs[0]["accepted"] / rs[0]["drafted"] if rs[0]["drafted"] else float("nan")
            per_step = (len(ref) - 1) / max(len(ref) - 1 - rs[0]["accepted"], 1)
            print(f"  {task:8s} drafts {d:>3s}: {med:6.2f} tok/s  x{med / base:4.2f}  drafted {rs[0]['drafted']:4d}  "
                  f"accepted {acc:5.1%}  tokens/step {per_step:4.2f}")


if __name__ == "__main__":
    main()
