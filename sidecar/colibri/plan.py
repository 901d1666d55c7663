"""The memory plan: how a model is placed on this machine.

The dense part (attention, norms, embeddings, routers, shared experts) and
the KV slots stay in RAM; routed experts stay resident when everything fits
in available memory with a margin, else they stream from disk into a RAM
budget: what is left after the dense part and the KV slots, three quarters
of it as a cache and a quarter pinned by learned routing heat. Available
memory is the host's or, in a container, what its cgroup limit leaves
(colibri.container), whichever is less; the default thread count heeds the
cgroup's CPU quota and the process's affinity. `coli plan` prints it; `coli
serve`, `coli generate` and `coli perplexity` open the engine with it.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

GIB = 1 << 30
MIB = 1 << 20
# Under a cgroup limit the margin is for this process's own growth (scratch buffers, Python),
# not for the system: an eighth of the limit, at least this much, at most the host's margin.
MIN_CGROUP_MARGIN = 64 * MIB
EXPERT_TENSOR = re.compile(r"^blk\.\d+\.ffn_(gate|up|down)_exps\.weight$")
# Gemma 4 E2B/E4B's per-layer token table: the engine reads a token's row in place from the
# file mapping (model.c binds it, forward.c reads rows), so only the rows of tokens seen are in RAM
ROW_READ_TENSORS = ("per_layer_token_embd.weight",)
# a cache smaller than this many experts per layer thrashes on every token
MIN_EXPERTS_PER_LAYER_FACTOR = 2
DRAFTER_NAMES = {"mtp": "MTP block", "model": "draft model", "lookup": "prompt lookup"}  # Engine.drafter's, in words
DEFAULT_DRAFT_TOKENS = 4  # engine.c DRAFT_DEFAULT: tokens drafted per step when --draft-tokens is not given
# The automatic context: the model's trained length (coding agents send 20-60k-token prompts),
# halved while the KV the slots may hold would take more than a quarter of the RAM left after the
# margin; never below 4096. KV pages are taken only as they are written, so the plan counts what a
# slot may come to hold: one slot at the full context, each other one at SLOT_TYPICAL_CTX tokens
# (a conversation's), not every slot at full length.
AGENT_CTX = 32768  # what a coding agent's first turns need (Claude Code's first is ~19k tokens)
SLOT_TYPICAL_CTX = 8192
MIN_AUTO_CTX = 4096
KV_SHARE = 0.25
# Sliding-window layers keep their window only (engine/src/kv.c: n_swa + a batch of ENGINE_BATCH
# rows + 64, in cells of 64); the families' default period when the file names none (model.c)
SWA_PERIOD = {"gemma3": 6, "gpt-oss": 2}
ENGINE_BATCH = 512


@dataclass
class Plan:
    model: str
    arch: str
    n_layer: int
    n_expert: int
    n_expert_used: int
    moe_layers: int
    file_bytes: int
    dense_bytes: int           # everything but the routed experts
    expert_bytes: int          # all routed experts
    expert_bytes_per_token: int  # n_expert_used experts in every MoE layer
    ctx: int
    kv_slots: int
    kv_bytes_per_slot: int
    ram_total: int
    ram_available: int
    margin: int
    cores: int
    threads: int               # compute threads with no --threads: cores, CPU quota and affinity
    disk_free: int
    placement: str             # "resident" or "streaming"
    cache_bytes: int           # cache budget for streamed experts (0 when resident)
    pin_bytes: int             # experts pinned by learned heat (0 when resident)
    fits: bool
    reason: str
    memory_limit: int = 0      # the container's (cgroup) memory limit in bytes; 0: none applies
    memory_source: str = ""    # where ram_available came from when a cgroup limits it
    checkpoint_bytes_per_slot: int = 0  # hybrid models: the recurrent-state checkpoints a slot may keep
    row_read_bytes: int = 0    # tables read a token's row at a time from the file (not in dense_bytes): the token
                               # embeddings where the LM head is a matrix of its own, Gemma 4's per-layer ones
    cpu_quota: float = 0.0     # the cgroup's CPU quota in CPUs; 0: none
    drafter: str = ""          # what drafts with weights of its own in RAM: "mtp" (the file's MTP block), "model"
                               # (--draft-model); "": nothing (prompt lookup, or drafting off)
    draft_bytes: int = 0       # the drafter's weights, in RAM beside the dense part (not in dense_bytes)
    draft_kv_bytes_per_slot: int = 0  # the drafter's own KV cache per slot at ctx
    verify_state_bytes_per_slot: int = 0  # hybrid models that draft: a verify's copies of the recurrent state,
                                          # one per drafted row (slots.c take_back)

    def read_per_token(self, hit_rate: float) -> int:
        """Expected expert bytes read from disk per token at a cache hit rate."""
        if self.placement == "resident":
            return 0
        return int(self.expert_bytes_per_token * (1.0 - hit_rate))

    def as_dict(self) -> dict:
        d = asdict(self)
        d["read_per_token_at"] = {f"{h:.2f}": self.read_per_token(h) for h in (0.5, 0.8, 0.9, 0.95)}
        return d


def _indexer_layers(meta: dict, arch: str, n_layer: int, trained: int) -> int:
    """Layers that cache DeepSeek sparse attention's indexer keys (the engine's model.c
    indexer_full): every layer of deepseek32; glm-dsa's "full" ones, as
    attention.indexer.types says, else all below a 1M trained context (GLM-5/5.1)
    and GLM-5.2's pattern above it (layers 0, 1, then every fourth from 2)."""
    if arch == "deepseek32":
        return n_layer
    if arch != "glm-dsa":
        return 0
    types = meta.get(f"{arch}.attention.indexer.types")
    if isinstance(types, list):
        return sum(1 for t in types[:n_layer] if t)
    if types is not None:
        return n_layer if types else 0
    if trained < 1048576:
        return n_layer
    return sum(1 for il in range(min(n_layer, 78)) if il < 2 or (il - 2) % 4 == 0)


GDN_ARCHS = ("qwen3next", "qwen35moe")  # Gated DeltaNet layers between full-attention ones


def _recurrent_layers(meta: dict, arch: str, n_layer: int) -> int:
    """Gated DeltaNet layers (the engine's model.c gdn_layer_recurrent): attention.recurrent_layers'
    flags where the file has them, else all but every full_attention_interval-th (4 without the key)."""
    if arch not in GDN_ARCHS:
        return 0
    flags = meta.get(f"{arch}.attention.recurrent_layers")
    if isinstance(flags, list):
        return sum(1 for f in flags[:n_layer] if f)
    interval = int(meta.get(f"{arch}.full_attention_interval") or 4)
    return sum(1 for il in range(n_layer) if (il + 1) % interval != 0)


def _recurrent_state_bytes(meta: dict, arch: str, n_layer: int) -> int:
    """A slot's f32 state of its linear layers, whatever its context: the short convolution's last
    conv_kernel - 1 inputs (keys, queries and values) and each value head's state_size^2 matrix."""
    n = _recurrent_layers(meta, arch, n_layer)
    if not n:
        return 0
    conv = int(meta.get(f"{arch}.ssm.conv_kernel") or 4)
    head = int(meta.get(f"{arch}.ssm.state_size") or 128)
    k_heads = int(meta.get(f"{arch}.ssm.group_count") or 16)
    v_heads = int(meta.get(f"{arch}.ssm.time_step_rank") or 32)
    return n * ((conv - 1) * head * (2 * k_heads + v_heads) + v_heads * head * head) * 4


def _checkpoint_bytes(meta: dict, arch: str, n_layer: int) -> int:
    """What a slot's recurrent-state checkpoints may take (slots.c: COLI_RS_CHECKPOINTS copies of the
    state, 8 by default, at most 64), beside the KV mapping: taken on first use, so not in kv_bytes."""
    state = _recurrent_state_bytes(meta, arch, n_layer)
    try:
        n = int(os.environ.get("COLI_RS_CHECKPOINTS", "8"))
    except ValueError:
        n = 8
    return state * min(max(n, 0), 64)


def _drafted_rows(draft_tokens: int | None) -> int:
    """The most rows a slot drafts per step (the engine's draft_k): --draft-tokens, else the default, 4
    (prompt lookup drafts whenever drafting is on, with or without a drafter of weights)."""
    return DEFAULT_DRAFT_TOKENS if draft_tokens is None else max(draft_tokens, 0)


def _sliding_layers(meta: dict, arch: str, n_layer: int) -> tuple[int, int]:
    """(layers whose cache keeps a window, the window's cells) as the engine maps them (kv.c)."""
    n_swa = int(meta.get(f"{arch}.attention.sliding_window") or 0)
    pattern = meta.get(f"{arch}.attention.sliding_window_pattern")
    if n_swa <= 0 or os.environ.get("COLI_SWA_FULL", "") == "1":
        return 0, 0
    if isinstance(pattern, list):
        layers = sum(1 for f in pattern[:n_layer] if f)
    else:
        period = int(pattern) if pattern is not None else SWA_PERIOD.get(arch, 0)
        if pattern is None and not period:
            return 0, 0
        layers = n_layer if period == 0 else sum(1 for il in range(n_layer) if il % period < period - 1)
    return layers, (n_swa + 64 + ENGINE_BATCH + 63) // 64 * 64


def _widest(value) -> int:
    """A key llama.cpp reads as one value or one per layer: the largest."""
    if isinstance(value, list):
        return int(max(value, default=0))
    return int(value or 0)


def _kv_bytes_per_slot(meta: dict, arch: str, n_layer: int, ctx: int, trained: int = 0) -> int:
    state = _recurrent_state_bytes(meta, arch, n_layer)
    n_layer -= _recurrent_layers(meta, arch, n_layer)  # the KV cache holds the full-attention layers alone
    n_head = _widest(meta.get(f"{arch}.attention.head_count")) or 1
    n_head_kv = _widest(meta.get(f"{arch}.attention.head_count_kv")) or n_head
    n_embd = int(meta.get(f"{arch}.embedding_length") or 0)
    k = int(meta.get(f"{arch}.attention.key_length") or n_embd // n_head)
    v = int(meta.get(f"{arch}.attention.value_length") or n_embd // n_head)  # llama.cpp's default, not k
    if meta.get(f"{arch}.attention.key_length_mla"):
        # MLA: one latent row per token (kv_lora_rank + rope dims, key_length); the values are read from it;
        # DSA models also cache one f16 indexer key per token and full indexer layer
        indexer = _indexer_layers(meta, arch, n_layer, trained) * int(meta.get(f"{arch}.attention.indexer.key_length") or 0)
        return (n_layer * int(n_head_kv) * k + indexer) * ctx * 2
    if meta.get(f"{arch}.attention.key_length_swa"):  # gemma4: per-layer head sizes and KV heads, shared KV
        # the engine caches the first n_layer - shared_kv_layers layers, each row as wide as the widest layer's
        n_layer -= int(meta.get(f"{arch}.attention.shared_kv_layers") or 0)
        pattern = meta.get(f"{arch}.attention.sliding_window_pattern")
        heads = meta.get(f"{arch}.attention.head_count_kv") or n_head
        k_swa = int(meta[f"{arch}.attention.key_length_swa"])
        widths = [(int(heads[il]) if isinstance(heads, list) else int(heads))
                  * (k_swa if isinstance(pattern, list) and il < len(pattern) and pattern[il] else k)
                  for il in range(max(n_layer, 0))]
        n_head_kv, k = 1, max(widths, default=0)
        v = k
    swa_layers, swa_cells = _sliding_layers(meta, arch, n_layer)
    if swa_cells >= ctx:  # a window no smaller than the context: every layer keeps every position
        swa_layers = 0
    cells = (n_layer - swa_layers) * ctx + swa_layers * swa_cells
    return (cells * int(n_head_kv) * (k + v) * 2 + 63) // 64 * 64 + state  # f16 keys and values


def _one_layer_kv_bytes(meta: dict, arch: str, ctx: int) -> int:
    """An MTP block's KV per slot: one full-attention layer (MLA: the latent row; no indexer keys, the
    block attends densely: llama.cpp's graph_mtp)."""
    n_head = _widest(meta.get(f"{arch}.attention.head_count")) or 1
    n_head_kv = _widest(meta.get(f"{arch}.attention.head_count_kv")) or n_head
    n_embd = int(meta.get(f"{arch}.embedding_length") or 0)
    k = int(meta.get(f"{arch}.attention.key_length") or n_embd // n_head)
    v = int(meta.get(f"{arch}.attention.value_length") or n_embd // n_head)
    if meta.get(f"{arch}.attention.key_length_mla"):
        return n_head_kv * k * ctx * 2
    return (ctx * n_head_kv * (k + v) * 2 + 63) // 64 * 64


@dataclass
class _File:
    """What the plan reads of a GGUF file."""
    info: dict
    arch: str
    meta: dict
    tensors: list           # (name, nbytes)
    mtp_layers: int         # nextn_predict_layers: blocks after the trunk's

    @property
    def n_layer(self) -> int:  # the trunk's blocks
        return int(self.info.get("n_layer") or 0) - self.mtp_layers

    def mtp_block(self) -> list:
        """The tensors of the MTP block the engine drafts with (the first; model.c load_mtp_block), or []
        when the file has none it can run: no nextn.eh_proj, or no routed experts."""
        if not self.mtp_layers or not self.info.get("n_expert"):
            return []
        prefix = f"blk.{self.n_layer}."
        # a sparse-attention model's block attends densely: its indexer goes unread (llama.cpp's graph_mtp)
        block = [(n, b) for n, b in self.tensors if n.startswith(prefix) and not n.startswith(prefix + "indexer.")]
        return block if any(n == prefix + "nextn.eh_proj.weight" for n, _ in block) else []


def _read(path: Path) -> _File:
    from colibri.engine import GGUFFile

    with GGUFFile(path) as g:
        info = g.describe()
        arch = info.get("arch") or "?"
        keys = ("head_count", "head_count_kv", "key_length", "value_length", "key_length_mla",
                "indexer.key_length", "indexer.types", "sliding_window", "sliding_window_pattern",
                "key_length_swa", "shared_kv_layers")
        gdn = ("full_attention_interval", "ssm.conv_kernel", "ssm.state_size", "ssm.group_count", "ssm.time_step_rank")
        meta = {k: g.get(k) for k in [f"{arch}.attention.{x}" for x in keys + ("recurrent_layers",)]
                + [f"{arch}.{x}" for x in ("embedding_length",) + gdn]}
        mtp_layers = int(g.get(f"{arch}.nextn_predict_layers") or 0)
        tensors = [(t.name, t.nbytes) for t in g.tensors()]
    return _File(info, arch, meta, tensors, mtp_layers)


def auto_ctx(trained: int, kv_bytes_of, room: int) -> int:
    """The context `coli serve` opens without --ctx: the trained context, halved while
    kv_bytes_of(ctx) (what the slots may hold: _slots_kv) is over KV_SHARE of room."""
    ctx = trained
    while ctx > MIN_AUTO_CTX and kv_bytes_of(ctx) > KV_SHARE * max(room, 0):
        ctx //= 2
    return max(min(ctx, trained), min(MIN_AUTO_CTX, trained))


def _slots_kv(kv_of, ctx: int, slots: int) -> int:
    """The KV the plan counts for `slots` slots of ctx: one at full length, the others at SLOT_TYPICAL_CTX
    (pages are taken as positions fill: an idle or short slot costs little)."""
    return kv_of(ctx) + max(slots - 1, 0) * kv_of(min(ctx, SLOT_TYPICAL_CTX))


@dataclass(frozen=True)
class Memory:
    total: int
    available: int
    margin: int
    limit: int = 0
    source: str = ""
    cpu_quota: float = 0.0
    threads: int = 1


def machine_memory(root: str | os.PathLike[str] = "/") -> Memory:
    """RAM and CPUs this process may use: the host's (psutil), lowered by the cgroup limits
    (colibri.container) that `root`'s /proc/self/cgroup puts it under."""
    from colibri import container

    vm = psutil.virtual_memory()
    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    total, available, margin = vm.total, vm.available, max(GIB, vm.total // 10)
    lim = container.memory_limit(root)
    cpu = container.cpu_limit(root)
    threads = container.default_threads(cores, cpu, container.affinity() if str(root) == "/" else None)
    limit, source = 0, ""
    if lim is not None:
        log.info("cgroup v%d memory: %s is %d bytes (%s) in %s, usage %d, reclaimable %d, available %d; host "
                 "available %d", lim.version, lim.key, lim.limit, human(lim.limit), lim.cgroup, lim.usage,
                 lim.reclaimable, lim.available, vm.available)
        if lim.available < available or lim.limit < total:
            limit = lim.limit
            total = min(total, lim.limit)
            available = min(available, lim.available)
            margin = min(margin, max(MIN_CGROUP_MARGIN, lim.limit // 8))
            source = f"container memory limit {human(lim.limit, whole=True)} (cgroup v{lim.version})"
    if cpu is not None:
        log.info("cgroup v%d CPU quota: %.2f CPUs (%s in %s); %d cores, default threads %d", cpu.version, cpu.cpus,
                 cpu.key, cpu.cgroup, cores, threads)
    return Memory(total, available, margin, limit, source, cpu.cpus if cpu else 0.0, threads)


def make_plan(path: str | os.PathLike[str], *, ctx: int | None = None, kv_slots: int = 1,
              expert_cache_gb: float | None = None, pin_gb: float | None = None,
              cgroup_root: str | os.PathLike[str] = "/", kv_tokens: int | None = None,
              learned_heat: bool = True, draft_tokens: int | None = None,
              draft_model: str | os.PathLike[str] | None = None) -> Plan:
    """The plan for `path` on this machine (in its container, when a cgroup limits it). expert_cache_gb /
    pin_gb force a streaming budget (in GiB) instead of the automatic choice. cgroup_root: where
    /proc/self/cgroup and the cgroup mounts are read (tests point it at a fake tree). kv_tokens: the
    tokens a one-shot run can write per slot (its KV pages are taken only as written), when fewer
    than ctx. learned_heat False (a one-shot command pins nothing): the whole budget is LRU cache.
    draft_tokens (None: the default, on; 0: off) and draft_model (a GGUF file): what drafts, whose weights
    and KV take RAM beside the model's: a draft model, else the file's MTP block (its experts are read
    in place, never streamed); prompt lookup takes none. The file's other MTP blocks are never read."""
    path = Path(path)
    f = _read(path)
    arch, meta, n_layer = f.arch, f.meta, f.n_layer
    info = f.info
    block = f.mtp_block()
    skipped = {n for n, _ in f.tensors if f.mtp_layers and _block_of(n) is not None and _block_of(n) >= n_layer}
    dense = experts = row_read = 0
    moe_layers = set()
    # the token table is read a row at a time (forward.c) unless it is also the LM head (tied)
    row_tables = ROW_READ_TENSORS + (("token_embd.weight",) if any(n == "output.weight" for n, _ in f.tensors)
                                     else ())
    for name, nbytes in f.tensors:
        if name in skipped:  # MTP blocks: the drafter's (below), or never read
            continue
        if EXPERT_TENSOR.match(name):
            experts += nbytes
            moe_layers.add(name.split(".")[1])
        elif name in row_tables:
            row_read += nbytes
        else:
            dense += nbytes
    n_expert = int(info.get("n_expert") or 0)
    used = _widest(info.get("n_expert_used"))
    trained = int(info.get("n_ctx_train") or 4096)
    per_token = experts // max(n_expert, 1) * used if n_expert else 0
    vm = machine_memory(cgroup_root)
    margin = vm.margin
    drafting = draft_tokens is None or draft_tokens > 0
    draft = _read(Path(draft_model)) if draft_model and drafting else None
    drafter = "model" if draft else "mtp" if block and drafting else ""
    if draft:
        draft_bytes = sum(b for n, b in draft.tensors
                          if not (draft.mtp_layers and (_block_of(n) or 0) >= draft.n_layer))
        draft_kv_of = lambda n: _kv_bytes_per_slot(draft.meta, draft.arch, draft.n_layer, n)  # noqa: E731
    elif drafter == "mtp":
        draft_bytes = sum(b for _, b in block)
        draft_kv_of = lambda n: _one_layer_kv_bytes(meta, arch, n)  # noqa: E731
    else:
        draft_bytes, draft_kv_of = 0, (lambda n: 0)
    if ctx:
        ctx = min(ctx, trained)
    else:
        kv_of = lambda n: _kv_bytes_per_slot(meta, arch, n_layer, n, trained) + draft_kv_of(n)  # noqa: E731
        ctx = auto_ctx(trained, lambda n: _slots_kv(kv_of, n, kv_slots), vm.available - margin - draft_bytes)
    kv = _kv_bytes_per_slot(meta, arch, n_layer, ctx, trained)
    disk_free = psutil.disk_usage(str(path.parent)).free
    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    base = dict(model=str(path), arch=arch, n_layer=n_layer, n_expert=n_expert, n_expert_used=used,
                moe_layers=len(moe_layers), file_bytes=int(info.get("file_bytes") or path.stat().st_size),
                dense_bytes=dense, expert_bytes=experts, expert_bytes_per_token=per_token, ctx=ctx,
                kv_slots=kv_slots, kv_bytes_per_slot=kv, ram_total=vm.total, ram_available=vm.available,
                margin=margin, cores=cores, threads=vm.threads, disk_free=disk_free, memory_limit=vm.limit,
                memory_source=vm.source, cpu_quota=vm.cpu_quota,
                checkpoint_bytes_per_slot=_checkpoint_bytes(meta, arch, n_layer), row_read_bytes=row_read,
                drafter=drafter, draft_bytes=draft_bytes, draft_kv_bytes_per_slot=draft_kv_of(ctx),
                verify_state_bytes_per_slot=_recurrent_state_bytes(meta, arch, n_layer) * _drafted_rows(draft_tokens))
    kv_all = lambda n: _kv_bytes_per_slot(meta, arch, n_layer, n, trained) + draft_kv_of(n)  # noqa: E731
    if kv_tokens and kv_tokens < ctx:  # the tokens a one-shot run writes, every slot
        kv_counted = kv_all(kv_tokens) * kv_slots
    else:  # what the slots may hold (_slots_kv)
        kv_counted = _slots_kv(kv_all, ctx, kv_slots)
    fixed = (dense + draft_bytes + kv_counted
             + (base["checkpoint_bytes_per_slot"] + base["verify_state_bytes_per_slot"]) * kv_slots)
    room = vm.available - margin - fixed
    one_round = per_token * MIN_EXPERTS_PER_LAYER_FACTOR  # a couple of tokens' experts in every layer
    if expert_cache_gb is not None or pin_gb is not None:
        cache = int((expert_cache_gb or 0) * GIB)
        pin = int((pin_gb or 0) * GIB)
        if n_expert == 0:
            return Plan(**base, placement="resident", cache_bytes=0, pin_bytes=0, fits=room >= 0,
                        reason="a dense model: there are no routed experts to stream")
        cache = max(cache, 1)  # asked for streaming: at least one expert per layer
        fits = room - cache - pin >= 0
        return Plan(**base, placement="streaming", cache_bytes=cache, pin_bytes=pin, fits=fits,
                    reason="the expert budget was set by hand" + ("" if fits else
                           "; it does not fit in available memory with the margin"))
    if room >= experts:
        return Plan(**base, placement="resident", cache_bytes=0, pin_bytes=0, fits=True,
                    reason="everything fits in available memory with a margin"
                    if n_expert else "a dense model that fits in available memory with a margin")
    if n_expert == 0:
        return Plan(**base, placement="resident", cache_bytes=0, pin_bytes=0, fits=False,
                    reason="a dense model larger than available memory: it will page from disk")
    budget = max(room, 0)
    fits = budget >= one_round
    cache = max(budget * 3 // 4, min(budget, one_round)) if budget else 1
    pin = max(budget - cache, 0)
    if not learned_heat:
        cache, pin = max(budget, 1), 0
    return Plan(**base, placement="streaming", cache_bytes=cache, pin_bytes=pin, fits=fits,
                reason="the routed experts do not fit: they stream from disk into what is left"
                + ("" if fits else "; that is less than two tokens' experts, so expect disk-bound speed"))


def _block_of(name: str) -> int | None:
    """The block index of a tensor blk.N.*, else None."""
    if not name.startswith("blk."):
        return None
    head = name[4:].split(".", 1)[0]
    return int(head) if head.isdigit() else None


ENGINE_DEFAULT_CTX = 4096  # the engine's context when opened with n_ctx 0 (at most the trained one)


def engine_draft_tokens(flag: int | None) -> int:
    """--draft-tokens as colibri_config.draft_tokens: None the engine's default (0 there), 0 none (-1 there)."""
    return 0 if flag is None else flag if flag > 0 else -1


def draft_model_path(chosen: str | None):
    """--draft-model as a file: a path, or a library model's id (pulled as `coli models pull` would); None: none."""
    if not chosen:
        return None
    from colibri.models import resolve_model

    return resolve_model(chosen)


def open_planned(path: str | os.PathLike[str], placement: dict, *, ctx: int | None = None, threads: int | None = None,
                 n_batch: int = 0, kv_slots: int = 1, kv_tokens: int | None = None):
    """Plan `path` (placement: cli_options.placement_from_args) and open the engine as planned: the
    expert cache, the plan's context, and threads (None: the plan's default, which heeds a CPU quota).
    One-shot commands learn no routing heat, so an automatic budget is all LRU cache. kv_tokens: most
    tokens the run writes (make_plan). Returns (engine, plan). `coli generate` and `coli perplexity`
    open models here."""
    from colibri import kernel_choice
    from colibri.engine import Engine

    draft_model = draft_model_path(placement.get("draft_model"))
    plan = make_plan(path, ctx=ctx or ENGINE_DEFAULT_CTX, kv_slots=kv_slots, kv_tokens=kv_tokens,
                     expert_cache_gb=placement.get("expert_cache_gb"), pin_gb=placement.get("pin_gb"),
                     learned_heat=False, draft_tokens=placement.get("draft_tokens"), draft_model=draft_model)
    log_plan(plan)
    kernel_choice.choose(path)
    engine = Engine(path, n_ctx=plan.ctx, n_slots=kv_slots, n_threads=threads or plan.threads, n_batch=n_batch,
                    expert_cache_bytes=plan.cache_bytes, expert_pin_bytes=plan.pin_bytes,
                    io_threads=placement.get("io_threads") or 0, direct_io=bool(placement.get("direct_io", True)),
                    prefetch=placement.get("prefetch", True), expert_policy=placement.get("expert_policy") or "",
                    draft_tokens=engine_draft_tokens(placement.get("draft_tokens")), draft_model=draft_model)
    log_repack(engine)
    return engine, plan


def log_repack(engine) -> None:
    """One line at INFO (-v) when the engine rewrote weights into its tile layout at load."""
    n = int(engine.model_info().get("repacked_bytes") or 0)
    if n:
        log.info("repacked %s of weights into 16-row tiles (COLI_REPACK=0: as stored)", human(n))


def log_plan(plan: Plan) -> None:
    """One line at INFO for the placement (-v), a warning only when the model does not fit."""
    where = f" ({plan.memory_source})" if plan.memory_source else ""
    if plan.placement == "streaming":
        log.info("experts stream from disk: %s cache + %s pinned%s: %s", human(plan.cache_bytes),
                 human(plan.pin_bytes), where, plan.reason)
    else:
        log.info("placement resident%s: %s", where, plan.reason)
    if not plan.fits:
        log.warning("the model does not fit in available memory%s: %s", where, plan.reason)


def human(n: float, whole: bool = False) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" or (whole and n == int(n)) else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def describe(plan: Plan) -> str:
    p = plan
    lines = [
        f"model        {p.model}",
        f"             {p.arch}, {p.n_layer} layers" + (f", {p.n_expert} experts (top {p.n_expert_used}) in "
                                                        f"{p.moe_layers} layers" if p.n_expert else ", dense"),
        f"machine      {human(p.ram_total)} RAM, {human(p.ram_available)} available, {p.cores} cores, "
        f"{human(p.disk_free)} free on the model's disk",
    ]
    if p.memory_source:
        lines.append(f"limit        {p.memory_source}: {human(p.ram_available)} of it available")
    if p.cpu_quota:
        lines.append(f"cpu quota    {p.cpu_quota:g} CPUs (cgroup): {p.threads} compute thread(s) by default")
    lines.append(f"dense part   {human(p.dense_bytes)} (always in RAM)")
    if p.row_read_bytes:
        lines.append(f"token tables {human(p.row_read_bytes)} of embeddings, read a token's row at a time from "
                     f"the file (only the rows of tokens seen take RAM)")
    if p.n_expert:
        lines.append(f"experts      {human(p.expert_bytes)} in all; {human(p.expert_bytes_per_token)} are "
                     f"active per token")
    lines.append(f"KV cache     up to {human(p.kv_bytes_per_slot)} per slot at {p.ctx} tokens x {p.kv_slots} slot(s); "
                 f"pages are taken as positions fill")
    if p.drafter:
        what = DRAFTER_NAMES[p.drafter]
        lines.append(f"drafter      {what}: {human(p.draft_bytes)} of weights in RAM + up to "
                     f"{human(p.draft_kv_bytes_per_slot)} of its KV per slot (--draft-tokens 0: none)")
    if p.checkpoint_bytes_per_slot:
        lines.append(f"checkpoints  up to {human(p.checkpoint_bytes_per_slot)} per slot of recurrent state kept "
                     f"along cached prompts (COLI_RS_CHECKPOINTS)")
    if p.verify_state_bytes_per_slot:
        lines.append(f"verify       {human(p.verify_state_bytes_per_slot)} per slot of recurrent state copies, one "
                     f"per drafted token, to take back rejected drafts (--draft-tokens 0: none)")
    lines.append(f"margin       {human(p.margin)} kept free for the system")
    if p.placement == "resident":
        lines.append("placement    resident: every weight stays in RAM")
    else:
        lines.append(f"placement    streaming: {human(p.cache_bytes)} expert cache + {human(p.pin_bytes)} pinned "
                     f"by learned heat")
        reads = ", ".join(f"{human(p.read_per_token(h))} at {h:.0%}" for h in (0.5, 0.8, 0.95))
        lines.append(f"disk reads   per token, by cache hit rate: {reads}")
    lines.append(f"verdict      {'fits' if p.fits else 'does NOT fit'}: {p.reason}")
    return "\n".join(lines)
