"""What the serving path costs: decode through the raw engine loop (`Engine.eval` +
`Engine.sample`, as bench_engine.py runs it), through `coli generate` (its command,
in process, stdout to /dev/null) and through a streamed `coli serve` request (a
real server, an SSE client), on the same file, prompt and token count. Mode `step`
(not run unless named) is the engine's batched step loop the server drives
(`Engine.submit` + `Engine.step` on one KV slot), without the server: what is left
between it and `serve` is the server's Python and the client.

Each run is a fresh child process; the three modes alternate round by round, each
round starting with the next (so machine noise hits them alike); medians, spread and the ratios mode/raw are
printed, in wall tok/s and per core-second (the process's CPU time over the
decode, engine threads included; for serve, the server process's CPU time),
with the median of each round's own ratio to the raw run ("paired").

    python bench/bench_serving.py [--model M] [--threads 1 2] [--reps 5] [--gen-tokens 128]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIDECAR = os.path.join(ROOT, "sidecar")

# raw: decode measured from the start of the first one-token eval to the end of the last; step and
# generate (which decodes on a slot, as serve does): from the start of the first step after the
# prefill's to the end of the last, counting tokens (a step that keeps drafts emits several)
CHILD = r"""
import json, os, sys, time
mode, model, threads, n_prompt, n_gen, ctx = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
sys.path.insert(0, sys.argv[7])
from tests.reference import real_text
from colibri.engine import Engine
marks = []
_eval = Engine.eval
def eval_(self, tokens, pos, logits=None):
    if len(tokens) == 1 and not marks:
        marks.append((time.perf_counter(), time.process_time()))
    out = _eval(self, tokens, pos, logits)
    if len(tokens) == 1:
        marks[1:] = [(time.perf_counter(), time.process_time())]
        counts[0] += 1
    return out
counts = [0]
Engine.eval = eval_
_step = Engine.step
def step_(self, *a):  # the slots' step (step, and generate, which decodes on a slot): tokens, not steps
    t, c = time.perf_counter(), time.process_time()
    events = _step(self, *a)
    tokens = sum(1 for ev in events if ev.token >= 0 and not ev.done)
    if tokens and stepped[0] and not marks:  # the first decode step: the prefill's step gave the first token
        marks.append((t, c))
    if marks:
        marks[1:] = [(time.perf_counter(), time.process_time())]
        counts[0] += tokens
    stepped[0] = stepped[0] or tokens > 0
    return events
stepped = [False]
Engine.step = step_
text = real_text()
if mode in ("raw", "step"):
    from colibri import kernel_choice
    kernel_choice.choose(model)  # what generate and serve do at load
if mode == "raw":
    e = Engine(model, n_ctx=ctx, n_threads=threads)
    prompt = e.tokenize(text)[:n_prompt]
    e.eval(prompt, 0)
    pos = len(prompt)
    for _ in range(n_gen):
        tok, _ = e.sample(); e.eval([tok], pos); pos += 1
elif mode == "step":  # the slots' step, as the server's engine thread calls it (one token a step after the prefill's)
    e = Engine(model, n_ctx=ctx, n_threads=threads, n_slots=1, draft_tokens=int(os.environ.get("COLI_DRAFT_TOKENS", 4)) or -1)
    prompt = e.tokenize(text)[:n_prompt]
    e.submit(0, prompt, max_tokens=n_gen + 1, ignore_eos=True, logprob=False)
    while not any(ev.done for ev in e.step()):
        pass
else:  # coli generate, its own command with the prompt cut to n_prompt tokens
    from colibri.cli import build_parser
    import colibri.commands.generate as g
    vocab = Engine(model, vocab_only=True)
    prompt_text = vocab.detokenize(vocab.tokenize(text, add_bos=False)[:n_prompt - 1]).decode("utf-8", "replace")
    vocab.close()
    args = build_parser().parse_args(["generate", "--model", model, "--threads", str(threads), "--ctx", str(ctx),
                                      "-p", prompt_text, "-n", str(n_gen + 1), "--ignore-eos"])
    sys.stdout = open(os.devnull, "w")
    args.func(args)
(t1, c1), (t2, c2) = marks[0], marks[-1]
n = counts[0] - 1
print(json.dumps({"decode": n / (t2 - t1), "decode_cpu": n / (c2 - c1), "tokens": n}), file=sys.__stdout__)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int, tid: int) -> float:
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def sse_frames(recvs: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """(arrival time, `data:` payload) of each SSE frame of a raw chunked HTTP response given as
    (time, bytes) per recv; a frame's time is that of the recv that completed it."""
    raw = b"".join(d for _, d in recvs)
    ends, pos = [], 0
    for t, d in recvs:
        pos += len(d)
        ends.append((pos, t))
    if not raw.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"serve refused the request: {raw[:2000]!r}")
    i = raw.index(b"\r\n\r\n") + 4
    body, offsets = bytearray(), []  # de-chunked body; the raw offset each body byte came from
    while True:
        j = raw.index(b"\r\n", i)
        size = int(raw[i:j].split(b";")[0], 16)
        if size == 0:
            break
        body += raw[j + 2:j + 2 + size]
        offsets.extend(range(j + 2, j + 2 + size))
        i = j + 2 + size + 2
    out, k, e = [], 0, 0
    for frame in bytes(body).split(b"\n\n")[:-1]:
        k += len(frame) + 2
        while ends[e][0] <= offsets[k - 1]:
            e += 1
        if frame.startswith(b"data: {"):
            out.append((ends[e][1], frame[6:]))
    return out


def frame_text(payload: bytes) -> str:
    d = json.loads(payload)
    return d["choices"][0].get("text", "") if d.get("choices") else ""


def texted_tokens(base: str, request: dict) -> list[int]:
    """The indices of the reply's tokens that carry text (one streamed frame each), from the
    same greedy request whole, with its tokens' texts."""
    body = json.dumps({**request, "stream": False, "logprobs": 1}).encode()
    req = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        tokens = json.loads(r.read())["choices"][0]["logprobs"]["tokens"]
    return [i for i, text in enumerate(tokens) if text]


def run_serve(args) -> dict:
    """A real `coli serve` and one streamed /v1/completions request with the prompt as token ids."""
    sys.path.insert(0, SIDECAR)
    sys.path.insert(0, ROOT)
    from colibri.engine import Engine
    from tests.reference import real_text

    vocab = Engine(args.model, vocab_only=True)  # the prompt as text (serve takes no token ids), as generate's
    prompt = vocab.detokenize(vocab.tokenize(real_text(), add_bos=False)[:args.prompt_tokens - 1]).decode(
        "utf-8", "replace")
    vocab.close()
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.path.join(args.root, "sidecar"))
    srv = subprocess.Popen([sys.executable, "-m", "colibri", "serve", "--model", args.model, "--port", str(port),
                            "--threads", str(args.threads), "--ctx", str(args.ctx), "--kv-slots", "1",
                            "--no-kv-persist"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 300
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200 and json.loads(r.read()).get("status") in ("ok", "ready"):
                        break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if srv.poll() is not None or time.time() > deadline:
                raise SystemExit(f"serve did not start:\n{srv.stderr.read().decode()[-3000:]}")
            time.sleep(0.2)
        with urllib.request.urlopen(base + "/v1/models", timeout=10) as r:
            model_id = json.loads(r.read())["data"][0]["id"]
        # ignore_eos: every token counted, as the raw and step loops do (a random file's EOS would end it early)
        request = {"model": model_id, "prompt": prompt, "max_tokens": args.gen_tokens + 1, "temperature": 0,
                   "stream": True, "ignore_eos": True}
        body = json.dumps(request).encode()
        # The client shares the cores with the server, so it does as little as a client can per
        # token: one recv(), its time kept; the HTTP chunks and the SSE frames are parsed after
        # the stream. The server's CPU clocks are read at the first token's bytes and at the end.
        recvs, cpu0 = [], None
        t_client = time.process_time()
        with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            while data := sock.recv(1 << 16):
                recvs.append((time.perf_counter(), data))
                if cpu0 is None and b'"text": "' in data and b'"text": ""' not in data:
                    cpu0 = proc_cpu(srv.pid), thread_cpu(srv.pid, srv.pid)
        cpu1 = proc_cpu(srv.pid), thread_cpu(srv.pid, srv.pid)
        client_s = time.process_time() - t_client
        times = [t for t, frame in sse_frames(recvs) if frame_text(frame)]
        if cpu0 is None or len(times) < 2:
            raise SystemExit(f"serve sent no tokens: {b''.join(d for _, d in recvs)[:2000]!r}")
        # A token whose bytes end no character (a byte token of a random file, often) sends no
        # frame: which tokens the frames stand for comes from the same greedy reply again,
        # whole, with each token's text (logprobs); the rate counts tokens, as the loops do.
        shown = texted_tokens(base, request)
        if len(times) == len(shown) + 1:  # the end's dangling partial character (U+FFFD), its own frame
            times.pop()
        if len(shown) != len(times):
            raise SystemExit(f"serve: {len(times)} text frames, but {len(shown)} tokens with text in the same reply")
        n = shown[-1] - shown[0]
        return {"decode": n / (times[-1] - times[0]), "decode_cpu": n / max(cpu1[0] - cpu0[0], 1e-9), "tokens": n,
                # the event loop's (main thread's) CPU per token: the Python side of serving, in ms
                "loop_ms": 1000 * (cpu1[1] - cpu0[1]) / n,
                # and the client's (this process's), which takes a share of the same cores
                "client_ms": 1000 * client_s / n}
    finally:
        srv.terminate()
        try:
            srv.wait(10)
        except subprocess.TimeoutExpired:
            srv.kill()


def run_child(mode: str, args) -> dict:
    if mode == "serve":
        return run_serve(args)
    env = dict(os.environ, PYTHONPATH=os.path.join(args.root, "sidecar"))
    cmd = [sys.executable, "-c", CHILD, mode, args.model, str(args.threads), str(args.prompt_tokens),
           str(args.gen_tokens), str(args.ctx), args.root]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="GGUF file (default: the embedded default model)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--modes", nargs="+", default=["raw", "generate", "serve"])
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--root", default=ROOT,
                    help="the checkout whose sidecar and built engine run (default: this one), e.g. main's for a before")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--draft-tokens", type=int, default=None,
                    help="speculative decoding in the step and serve modes (COLI_DRAFT_TOKENS; 0: off, the pipeline "
                         "alone against the raw loop; default: the engine's)")
    ap.add_argument("--isa", choices=("avx2", "avxvnni"), default=None,
                    help="every mode as on a CPU without AVX-512 (COLI_CPU_ISA)")
    args = ap.parse_args()
    if args.draft_tokens is not None:
        os.environ["COLI_DRAFT_TOKENS"] = str(args.draft_tokens)  # the children inherit it
    if args.isa:
        os.environ["COLI_CPU_ISA"] = args.isa  # the children inherit it
    if args.model is None:
        sys.path.insert(0, SIDECAR)
        from colibri.models import default_model_path

        os.environ.setdefault("COLI_DEFAULT_MODEL", "gemma-3-270m")  # as the tests' default model

        args.model = str(default_model_path())
    report = {}
    for threads in args.threads:
        args.threads_now = threads
        a = argparse.Namespace(**{**vars(args), "threads": threads})
        res: dict[str, list[dict]] = {m: [] for m in args.modes}
        for rep in range(args.reps):
            k = rep % len(args.modes)  # each round starts with the next mode: no mode always runs first
            for mode in args.modes[k:] + args.modes[:k]:
                r = run_child(mode, a)
                res[mode].append(r)
                print(f"[{threads}t rep {rep + 1}/{args.reps}] {mode:9s} {r['decode']:7.1f} tok/s  "
                      f"{r['decode_cpu']:7.1f} tok/cpu-s  ({r['tokens']} steps)"
                      + (f"  event loop {r['loop_ms']:.2f}, client {r['client_ms']:.2f} ms/token" if "loop_ms" in r else ""), file=sys.stderr, flush=True)
        print(f"\n{os.path.basename(args.model)} ({args.root}), {threads} thread(s), {args.reps} interleaved reps, "
              f"{args.prompt_tokens}-token prompt, {args.gen_tokens} decoded")
        print(f"{'':10s}{'tok/s med':>10s}{'min..max':>16s}{'ratio':>8s}{'paired':>8s}{'tok/cpu-s':>11s}{'ratio':>8s}")
        med = {m: {k: statistics.median(r[k] for r in rs) for k in ("decode", "decode_cpu")} for m, rs in res.items()}
        first = next(iter(res))
        base = med.get("raw") or med[first]
        base_runs = res.get("raw") or res[first]
        # the median of each round's ratio to the round's base run: a machine's drift between
        # rounds (here up to 10%) cancels, which the ratio of medians keeps
        paired = {m: statistics.median(r["decode"] / b["decode"] for r, b in zip(rs, base_runs))
                  for m, rs in res.items()}
        for m, rs in res.items():
            lo, hi = min(r["decode"] for r in rs), max(r["decode"] for r in rs)
            print(f"{m:10s}{med[m]['decode']:10.1f}{f'{lo:.1f}..{hi:.1f}':>16s}{med[m]['decode'] / base['decode']:8.3f}"
                  f"{paired[m]:8.3f}{med[m]['decode_cpu']:11.1f}{med[m]['decode_cpu'] / base['decode_cpu']:8.3f}")
        report[threads] = {"median": med, "paired": paired, "runs": res}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "results": report}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
