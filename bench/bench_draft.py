"""Speculative decoding: decode tok/s with up to 0, 2, 4 or 8 drafted tokens per step, from the model's own
MTP ("nextn") block where its file has one (engine/src/mtp.c), else by prompt lookup (engine/src/draft.h),
verified as the engine's plan chooses from measured step costs (`4`) or every one found (`4!`), on tasks where
the answer copies the prompt (rewriting code it was given) and where it does not (a question), greedy, through
the engine's step loop (what `coli serve` drives). The tokens are the same in every run (checked); only the
speed moves. Each (task, drafts) run is a fresh engine, runs alternate round by round, medians are printed
with the acceptance counters summed over the reps and tokens per step (tokens after the first / verifying
steps).

--expert-cache-gb G streams the routed experts from disk into a RAM cache of G GiB (Engine's
expert_cache_bytes) instead of keeping the whole file mapped. --draft-model D drafts with a smaller model of
the same vocabulary (Engine's draft_model) in every run that drafts.

--peer also measures llama.cpp's llama-server (--llama-server, default $COLI_LLAMA_SERVER) on the same file
and the same prompt tokens (the ids colibri tokenized, sent as a list to /completion), with as many threads
(`-t N -tb N`), greedy, `ignore_eos`, n_predict = --tokens: plain decoding and, per --peer-drafts value N,
`--spec-type draft-mtp` (N = 0: its default draft settings; N > 0: `--spec-draft-n-max N`). Each server
starts once per configuration (its load untimed) and gets two untimed warm-up requests, a short one and a
whole one (a fresh llama-server's first requests ran 10x slower here); its runs interleave
with colibri's, round by round. Its decode tok/s is the response's timings.predicted_per_second, its
acceptance timings.draft_n_accepted / draft_n. Its greedy tokens are checked against colibri's (a warning
saying how many leading tokens agree, not an error: the two engines' float sums differ). The table then
gives every row's ratio to llama.cpp plain too.

    python bench/bench_draft.py --model M [--threads 2] [--reps 3] [--tokens 160] [--drafts=-1,4,4!,8]
                                [--tasks edit,question] [--expert-cache-gb G]
                                [--peer [--llama-server BIN] [--peer-drafts=-1,0,1]]
"""
from __future__ import annotations

import argparse
import json
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


GIB = 1 << 30


def one_run(model: str, task: str, drafts: str, threads: int, tokens: int, cache_gb: float = 0,
            draft_model: str | None = None) -> dict:
    k = int(drafts.rstrip("!"))
    with Engine(model, n_ctx=2048, n_threads=threads, draft_tokens=k, draft_always=drafts.endswith("!"),
                expert_cache_bytes=int(cache_gb * GIB), draft_model=draft_model if k >= 0 else None) as e:
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
        drafter = e.drafter
    return {"tok_s": (len(out) - 1) / (t_end - t_first), "tokens": out, "drafted": st["draft_tokens"],
            "accepted": st["draft_accepted"], "steps": st["draft_steps"], "prompt": prompt, "drafter": drafter}


def peer_flags(n: int, threads: int) -> list[str]:
    """llama-server's flags for --peer-drafts value n: -1 plain, 0 draft-mtp as it defaults, N its n_max."""
    flags = ["-t", str(threads), "-tb", str(threads)]
    if n >= 0:
        flags += ["--spec-type", "draft-mtp"]
    if n > 0:
        flags += ["--spec-draft-n-max", str(n)]
    return flags


def peer_run(server, prompt: list[int], tokens: int) -> dict:
    """One greedy /completion of `tokens` tokens on the prompt's ids, no prompt cache; its own timings."""
    from tests.sidecar.upstream_support import connection

    conn = connection(server.url, timeout=600)  # a loaded 2-core machine can make it crawl
    try:
        conn.request("POST", "/completion", json.dumps({
            "prompt": prompt, "n_predict": tokens, "temperature": 0, "top_k": 1, "ignore_eos": True,
            "cache_prompt": False, "return_tokens": True, "seed": 0}), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        status, body = resp.status, resp.read()
    finally:
        conn.close()
    if status != 200:
        raise RuntimeError(f"llama-server answered {status}: {body[:300]!r}")
    r = json.loads(body)
    t = r["timings"]
    return {"tok_s": t["predicted_per_second"], "tokens": r["tokens"], "drafted": t.get("draft_n", 0),
            "accepted": t.get("draft_n_accepted", 0), "prompt_n": t["prompt_n"] + t.get("cache_n", 0)}


def agree(a: list[int], b: list[int]) -> int:
    """How many leading tokens two runs share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=160)
    ap.add_argument("--drafts", default="-1,4,4!,8", help="draft_tokens values; -1: none; N!: verify all")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--expert-cache-gb", type=float, default=0,
                    help="stream routed experts into a RAM cache of this many GiB (0: all resident)")
    ap.add_argument("--draft-model", default=None,
                    help="a smaller GGUF model of the same vocabulary drafts (Engine's draft_model) in every run "
                         "that drafts")
    ap.add_argument("--peer", action="store_true", help="measure llama.cpp's llama-server alongside")
    ap.add_argument("--llama-server", default=os.environ.get("COLI_LLAMA_SERVER"),
                    help="llama-server binary (default $COLI_LLAMA_SERVER)")
    ap.add_argument("--peer-drafts", default="-1,0,1",
                    help="llama-server configurations: -1 plain; 0 --spec-type draft-mtp with its defaults; "
                         "N draft-mtp with --spec-draft-n-max N")
    a = ap.parse_args()
    drafts = a.drafts.split(",")
    tasks = a.tasks.split(",")
    peers = [int(n) for n in a.peer_drafts.split(",")] if a.peer else []
    if peers and -1 not in peers:
        peers.insert(0, -1)  # the ratios' base
    servers = {}
    if peers:
        if not a.llama_server or not os.access(a.llama_server, os.X_OK):
            sys.exit("--peer needs a llama-server binary: --llama-server or $COLI_LLAMA_SERVER")
        from tests.sidecar.llama_server_support import LlamaCppServer, llama_server_version

        print(f"llama-server: {llama_server_version(a.llama_server)}", file=sys.stderr)
    runs: dict[tuple[str, str], list[dict]] = {}
    load0 = os.getloadavg()[0]
    try:
        for rep in range(a.reps):
            for task in tasks:
                for d in drafts:
                    r = one_run(a.model, task, d, a.threads, a.tokens, a.expert_cache_gb, a.draft_model)
                    runs.setdefault((task, d), []).append(r)
                    print(f"  rep {rep + 1} {task:8s} colibri drafts {d:>3s} ({r['drafter'] or 'none'}): "
                          f"{r['tok_s']:6.2f} tok/s", file=sys.stderr, flush=True)
                prompt = runs[(task, drafts[0])][0]["prompt"]
                for n in peers:
                    if n not in servers:  # started once, loaded untimed, warmed up with one short request
                        servers[n] = LlamaCppServer(a.llama_server, a.model, extra=peer_flags(n, a.threads)).start()
                        print(f"  llama-server {' '.join(peer_flags(n, a.threads))}", file=sys.stderr)
                        peer_run(servers[n], prompt[:8], 8)
                        peer_run(servers[n], prompt, a.tokens)  # and one whole one: its first ones crawl
                    r = peer_run(servers[n], prompt, a.tokens)
                    runs.setdefault((task, f"peer{n}"), []).append(r)
                    print(f"  rep {rep + 1} {task:8s} llama.cpp {peer_name(n):>14s}: {r['tok_s']:6.2f} tok/s",
                          file=sys.stderr, flush=True)
    finally:
        for s in servers.values():
            s.kill()
    cache = f", routed experts streamed into {a.expert_cache_gb:g} GiB" if a.expert_cache_gb else ""
    print(f"{os.path.basename(a.model)}, {a.threads} threads, {a.tokens} tokens greedy, {a.reps} reps (median){cache}; "
          f"load average {load0:.2f} before, {os.getloadavg()[0]:.2f} after (other work on the machine skews it)")
    if peers:
        print("  (x: to colibri's first --drafts row; then to llama.cpp plain)")
    for task in tasks:
        base = statistics.median(r["tok_s"] for r in runs[(task, drafts[0])])
        peer_base = statistics.median(r["tok_s"] for r in runs[(task, "peer-1")]) if peers else None
        ref = runs[(task, drafts[0])][0]["tokens"]
        rows = [(f"colibri {d:>3s}", runs[(task, d)]) for d in drafts]
        for d in drafts:
            assert all(r["tokens"] == ref for r in runs[(task, d)]), f"{task} drafts {d}: the tokens changed"
        for n in peers:
            rs = runs[(task, f"peer{n}")]
            rows.append((f"llama.cpp {peer_name(n)}", rs))
            if rs[0]["prompt_n"] != len(runs[(task, drafts[0])][0]["prompt"]):
                print(f"  warning: llama-server evaluated {rs[0]['prompt_n']} prompt tokens, colibri "
                      f"{len(runs[(task, drafts[0])][0]['prompt'])}")
            for r in rs:
                if r["tokens"] != ref:
                    print(f"  warning: {task} llama.cpp {peer_name(n)}: its tokens differ from colibri's after "
                          f"{agree(r['tokens'], ref)} of {len(ref)}")
                    break
        for name, rs in rows:  # the draft counters summed over the reps (the plan's choices vary run to run)
            med = statistics.median(r["tok_s"] for r in rs)
            drafted, accepted = sum(r["drafted"] for r in rs), sum(r["accepted"] for r in rs)
            acc = accepted / drafted if drafted else float("nan")
            n_out = sum(len(r["tokens"]) - 1 for r in rs)
            per_step = n_out / max(n_out - accepted, 1)
            vs_peer = f"  x{med / peer_base:4.2f} llama.cpp plain" if peer_base else ""
            print(f"  {task:8s} {name:24s}: {med:6.2f} tok/s  x{med / base:4.2f}{vs_peer}  "
                  f"drafted {drafted / len(rs):5.1f}/run  accepted {acc:5.1%}  tokens/step {per_step:4.2f}")


def peer_name(n: int) -> str:
    return "plain" if n < 0 else "draft-mtp" if n == 0 else f"draft-mtp n{n}"


if __name__ == "__main__":
    main()
