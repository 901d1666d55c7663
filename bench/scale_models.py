"""Benchmark files at the scale people download (issue #44): real layer shapes, random quantized
weights, written from a seed in minutes, never committed.

  qwen3-30b-a3b     qwen3moe: 48 layers, hidden 2048, 32 q / 4 kv heads of 128, 128 experts top-8 of
                    width 768, vocabulary 151936; experts Q4_K, attention and embeddings Q4_K, output
                    Q6_K (~17 GB, Unsloth/bartowski's Q4_K_M minus its Q6_K ffn_down halves)
  gpt-oss-20b       gpt-oss: 24 layers, hidden 2880, 64 q / 8 kv heads of 64, 32 experts top-4 of width
                    2880, vocabulary 201088, sliding window 128; experts MXFP4, the rest Q8_0 (~12 GB,
                    as ggml-org's gpt-oss-20b-mxfp4.gguf)
  qwen3.6-35b-a3b   qwen35moe: 40 layers (every 4th full attention, 16 q / 2 kv heads of 256; the others
                    Gated DeltaNet, 16 key / 32 value heads of 128), hidden 2048, 256 experts top-8 of width
                    512 plus a shared one, vocabulary 248320; Q4_K, output Q6_K (~20 GB)

Every routed expert's rows come from a pool of quantized rows (tests/fixtures/moe_models.py's
expert_pool_rows): the bytes differ per expert, and the writer runs at the disk's speed.

Routing. The files are written with `route_channels` (tests/fixtures/moe_models.py): the first 256
channels of the residual stream carry the token's embedding and nothing else (every matrix that
writes to the stream is zero there). A router row has two parts: one on those channels, which routes
a token by its identity, and one on the rest of the stream (the context: what attention and the
earlier layers wrote), weighted b. The identity part of row e is scaled by exp(s * z_e), z_e a fixed
per-layer permutation of normal quantiles: the wider rows reach the top-k more often, so a few
experts are hot and the rest a long tail.
  uniform     s 0, b 0: every expert alike and a token's experts independent of the last token's
              (the decode samples at temperature 1, so tokens are independent): the worst case.
  skewed      s 1, b 0.5 (skewed:<s>:<b> for others). Measured on the qwen3-30b-a3b miniature (96
              sampled tokens): the hottest 10% of a layer's experts take 46% of its routings (uniform:
              25%, the noise of 768 routings), 14 of 128 experts take half; a token shares 21% of its
              experts with the previous one (uniform: 11%, chance 6%); the next layer's router on this
              layer's input predicts 88% of its choices (uniform: 98%; real models: 80-90%).
The context part alone (s 0, b 0.5) routes the deep layers to a few experts (the stream's persistent
direction: 63% to the top 10% in the last layer), which is why the uniform case leaves it out.
`set_routing` rewrites only the routers in place (a .routing file beside records which), so one
17 GB file serves every case; `routing` measures popularity and overlap on any file.

    python bench/scale_models.py write qwen3-30b-a3b [--routing skewed|uniform] [--dir D]
    python bench/scale_models.py routing FILE [--routing skewed|uniform] [--tokens 96]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
from statistics import NormalDist

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "sidecar"))

from tests.fixtures import moe_models  # noqa: E402

SHAPES = {
    "qwen3-30b-a3b": dict(arch="qwen3moe", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128,
                          n_ff=6144, n_ff_exp=768, n_expert=128, n_expert_used=8, quant="Q4_K", out_quant="Q6_K",
                          n_vocab=151936, n_ctx_train=40960, rope_freq_base=1000000.0),
    "gpt-oss-20b": dict(arch="gpt-oss", n_layer=24, n_embd=2880, n_head=64, n_head_kv=8, head_dim=64,
                        n_ff=2880, n_ff_exp=2880, n_expert=32, n_expert_used=4, quant="Q8_0", exp_quant="MXFP4",
                        n_vocab=201088, n_swa=128, yarn_factor=32.0, yarn_orig_ctx=4096, n_ctx_train=131072,
                        rope_freq_base=150000.0, sink_gain=1.5, exp_gain=3.0, exp_bias_gain=0.3),
    "qwen3.6-35b-a3b": dict(arch="qwen35moe", n_layer=40, n_embd=2048, n_head=16, n_head_kv=2, head_dim=256,
                            n_ff=512, n_ff_exp=512, n_expert=256, n_expert_used=8, quant="Q4_K", out_quant="Q6_K",
                            n_vocab=248320, n_ctx_train=262144, rope_freq_base=10000000.0, ssm_d_conv=4,
                            ssm_d_state=128, ssm_n_group=16, ssm_dt_rank=32, full_attn_interval=4,
                            rope_sections=(11, 11, 10, 0)),
}
POOL_ROWS = 1024
SKEW = 1.0  # skewed routing: the spread of the router rows' scales (see the module's doc)
CONTEXT = 0.5  # skewed routing: the weight of the context channels in the router rows
ROUTE_CHANNELS = 256  # the stream's channels that carry only the token (MoeConfig.route_channels)


# a miniature of a shape for quick routing checks: every layer, expert count and width but the experts'
# FFN (32 wide) and the vocabulary (the trained one), Q4_0 (~1 GB)
MINI = dict(quant="Q4_0", out_quant="", n_ff_exp=32, n_vocab=0)


def config(shape: str, mini: bool = False, **overrides) -> moe_models.MoeConfig:
    if shape not in SHAPES:
        raise SystemExit(f"shape {shape!r}: expected one of {', '.join(SHAPES)}")
    return moe_models.MoeConfig(**{**SHAPES[shape], "expert_pool_rows": POOL_ROWS, "n_merges": 1000,
                                   "router_skew": 0.0, "route_channels": ROUTE_CHANNELS, **(MINI if mini else {}), **overrides})


def default_dir() -> Path:
    return Path(os.environ.get("COLI_SCALE_DIR") or moe_models.fixture_dir() / "scale")


def path_of(shape: str, directory: Path | None = None, mini: bool = False) -> Path:
    cfg = config(shape, mini)
    label = f"{shape}-mini" if mini else shape
    return (directory or default_dir()) / f"{label}-{cfg.expert_type}-{cfg.key()}.gguf"


def parse_routing(routing: str) -> tuple[float, float]:
    """(popularity spread s, context weight b) of a routing name: uniform (0, 0), skewed (the defaults),
    skewed:<s> or skewed:<s>:<b>."""
    if routing == "uniform":
        return 0.0, 0.0
    parts = routing.split(":")
    if parts[0] != "skewed" or len(parts) > 3:
        raise SystemExit(f"routing {routing!r}: uniform, skewed, skewed:<spread> or skewed:<spread>:<context>")
    s = float(parts[1]) if len(parts) > 1 else SKEW
    b = float(parts[2]) if len(parts) > 2 else CONTEXT
    return s, b


def canonical(routing: str) -> str:
    """The routing's name with its parameters: what a file's .routing stamp records."""
    s, b = parse_routing(routing)
    return "uniform" if (s, b) == (0.0, 0.0) else f"skewed:{s:g}:{b:g}"


def router_rows(cfg: moe_models.MoeConfig, name: str, routing: str) -> np.ndarray:
    """Layer `name`'s router (n_expert, n_embd), F32, for `routing` (parse_routing)."""
    s, b = parse_routing(routing)
    C = cfg.route_channels
    rng = np.random.default_rng([cfg.seed, 4404, int(name.split(".")[1])])
    ident = np.zeros((cfg.n_expert, cfg.n_embd), np.float32)  # the token's identity: the stream's first C channels
    ident[:, :C] = rng.standard_normal((cfg.n_expert, C))
    ident /= np.linalg.norm(ident, axis=1, keepdims=True)
    ranks = rng.permutation(cfg.n_expert)
    z = np.array([NormalDist().inv_cdf((r + 0.5) / cfg.n_expert) for r in ranks])
    w = ident * np.exp(s * z)[:, None].astype(np.float32)
    if b:  # the context: the rest of the stream, which attention carries from token to token
        ctx = np.zeros_like(ident)
        ctx[:, C:] = rng.standard_normal((cfg.n_expert, cfg.n_embd - C))
        w += np.float32(b) * ctx / np.linalg.norm(ctx, axis=1, keepdims=True)
    return (w * np.float32(cfg.router_gain * np.sqrt(cfg.n_embd / max(C, 1)))).astype(np.float32)


def set_routing(path: Path, cfg: moe_models.MoeConfig, routing: str) -> None:
    """Rewrite every ffn_gate_inp.weight of the file in place (F32 routers)."""
    from colibri.engine import GGUFFile

    with GGUFFile(path) as g:
        base = g.data_offset
        routers = [(t.name, base + t.offset, t.nbytes) for t in g.tensors()
                   if t.name.endswith("ffn_gate_inp.weight") and t.type == "F32"]
    with open(path, "r+b") as f:
        for name, off, n in routers:
            rows = router_rows(cfg, name, routing)
            assert rows.nbytes == n, (name, rows.nbytes, n)
            f.seek(off)
            f.write(rows.tobytes())
    stamp = path.with_suffix(".routing")
    stamp.write_text(canonical(routing))


def routing_of(path: Path) -> str:
    stamp = path.with_suffix(".routing")
    return stamp.read_text().strip() if stamp.exists() else "?"


def write(shape: str, routing: str = "skewed", directory: Path | None = None, mini: bool = False) -> Path:
    """The shape's file (written if missing), its routers set to `routing`."""
    cfg = config(shape, mini)
    path = path_of(shape, directory, mini)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        free = os.statvfs(path.parent)
        need = moe_models.estimate_bytes(cfg)
        if free.f_bavail * free.f_frsize < need * 1.05:
            raise SystemExit(f"{path.parent}: {need / 1e9:.1f} GB needed, "
                             f"{free.f_bavail * free.f_frsize / 1e9:.1f} GB free")
        print(f"writing {path} (~{need / 1e9:.1f} GB)", file=sys.stderr, flush=True)
        moe_models.write_config(path, cfg, progress=True)
        path.with_suffix(".routing").unlink(missing_ok=True)
    if routing_of(path) != canonical(routing):
        set_routing(path, cfg, routing)
    return path


def routing_stats(path: Path, tokens: int = 96, seed: int = 1, threads: int = 2) -> dict:
    """Popularity and token-to-token overlap of the experts a sampled decode routes to (the file resident
    or paged by the kernel: use on a machine with the RAM, or on the shape's --mini). Per MoE layer: the
    share of the routings that go to its hottest 10% of experts, the number of experts holding half of
    them, and the share of a token's experts that the previous token also used, beside chance (k/E)."""
    from colibri.engine import GGUFFile

    with GGUFFile(path) as g:
        info = g.describe()
    n_expert, k = int(info["n_expert"]), int(info["n_expert_used"])
    routes = trace(path, tokens, seed, threads)
    n_layer = len(routes[0])
    layers = [il for il in range(n_layer) if routes[0][il]]
    top_share, half, overlap = [], [], []
    for il in layers:
        counts = np.zeros(n_expert)
        for r in routes:
            for x in r[il]:
                counts[x] += 1
        srt = np.sort(counts)[::-1]
        top_share.append(srt[: max(n_expert // 10, 1)].sum() / srt.sum())
        half.append(int(np.searchsorted(np.cumsum(srt), srt.sum() / 2) + 1))
        overlap.append(np.mean([len(a[il] & b[il]) / k for a, b in zip(routes, routes[1:])]))
    return {"tokens": tokens, "layers": len(layers), "n_expert": n_expert, "k": k,
            "top10pct_share": float(np.mean(top_share)), "top10pct_share_by_layer": [round(x, 3) for x in top_share],
            "experts_for_half": float(np.mean(half)), "overlap": float(np.mean(overlap)),
            "overlap_by_layer": [round(x, 3) for x in overlap], "chance_overlap": k / n_expert}


def trace(path: Path, tokens: int, seed: int = 1, threads: int = 2) -> list[list[set[int]]]:
    """The experts each of `tokens` sampled tokens routes to, per layer (the file resident)."""
    from colibri.engine import Engine

    with Engine(path, n_ctx=tokens + 64, n_threads=threads) as e:
        e.seed(seed)
        prompt = [e.bos] + e.tokenize(" the quick brown fox jumps over the lazy dog", add_bos=False)
        e.eval(prompt, 0)
        routes, pos = [], len(prompt)
        for _ in range(tokens):
            tok, _ = e.sample(temperature=1.0)
            e.eval([tok], pos)
            pos += 1
            routes.append([{x for x, _ in layer} for layer in e.last_routing(0)])
    return routes


def simulate(routes: list[list[set[int]]], cap: int, policy: str, half_life: float = 64.0) -> float:
    """Hit rate of a per-layer cache of `cap` experts replaying the trace: lru, lrfu (the engine's rule:
    least frequency decayed by half_life steps, then least recent), lfu, or opt (Belady: evict the one
    needed furthest ahead, the bound no policy passes)."""
    hits = total = 0
    for il in range(len(routes[0])):
        seq = [r[il] for r in routes]
        if not seq[0]:
            continue
        cache: dict[int, float] = {}  # expert -> last use
        freq: dict[int, tuple[float, int]] = {}  # expert -> (frequency, as of step)
        for t, chosen in enumerate(seq):
            f_now = lambda e: freq.get(e, (0.0, t))[0] * 2 ** (-(t - freq.get(e, (0.0, t))[1]) / half_life)  # noqa: E731
            for e in chosen:
                total += 1
                hits += e in cache
            for e in chosen:
                if e not in cache and len(cache) >= cap:
                    spare = [x for x in cache if x not in chosen]
                    if policy == "lru":
                        out = min(spare, key=lambda x: cache[x])
                    elif policy == "lrfu":
                        out = min(spare, key=lambda x: (f_now(x), cache[x]))
                    elif policy == "lfu":
                        out = min(spare, key=lambda x: (freq.get(x, (0, 0))[0], cache[x]))
                    else:
                        def next_use(x):
                            return next((u for u in range(t + 1, len(seq)) if x in seq[u]), len(seq) + 1)
                        out = max(spare, key=next_use)
                    del cache[out]
                cache[e] = t
            for e in chosen:
                if policy == "lfu":
                    freq[e] = (freq.get(e, (0.0, 0))[0] + 1, t)
                else:
                    freq[e] = (f_now(e) + 1, t)
    return hits / max(total, 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("shape", choices=sorted(SHAPES))
    w.add_argument("--routing", default="skewed")
    w.add_argument("--dir", type=Path)
    w.add_argument("--mini", action="store_true", help="the shape's miniature (see MINI)")
    r = sub.add_parser("routing")
    r.add_argument("file", type=Path)
    r.add_argument("--shape", choices=sorted(SHAPES), help="rewrite the routers first (with --routing)")
    r.add_argument("--routing", default="")
    r.add_argument("--mini", action="store_true", help="the file is the shape's miniature")
    r.add_argument("--tokens", type=int, default=96)
    pol = sub.add_parser("policies", help="replay a sampled routing trace through cache policies")
    pol.add_argument("file", type=Path)
    pol.add_argument("--shape", choices=sorted(SHAPES), help="rewrite the routers first (with --routing)")
    pol.add_argument("--routing", default="")
    pol.add_argument("--mini", action="store_true")
    pol.add_argument("--tokens", type=int, default=256)
    pol.add_argument("--caps", default="12,20,40", help="experts per layer, comma-separated")
    args = ap.parse_args(argv)
    if args.cmd == "policies":
        if args.routing:
            set_routing(args.file, config(args.shape, args.mini), args.routing)
        routes = trace(args.file, args.tokens)
        print(f"{args.file.name}, routing {routing_of(args.file)}, {args.tokens} tokens: hit rate per policy")
        for cap in (int(c) for c in args.caps.split(",")):
            row = {p: simulate(routes, cap, p) for p in ("lru", "lfu", "opt")}
            row.update({f"lrfu/{h}": simulate(routes, cap, "lrfu", h) for h in (16, 64, 256)})
            print(f"  {cap:4d} experts per layer: " + "  ".join(f"{k} {100 * v:5.1f}%" for k, v in row.items()))
        return 0
    if args.cmd == "write":
        print(write(args.shape, args.routing, args.dir, args.mini))
        return 0
    if args.routing:
        if not args.shape:
            raise SystemExit("--routing needs --shape (the file's configuration)")
        set_routing(args.file, config(args.shape, args.mini), args.routing)
    print(json.dumps({"routing": routing_of(args.file), **routing_stats(args.file, args.tokens)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
