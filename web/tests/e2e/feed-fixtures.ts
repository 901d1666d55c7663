// Synthetic dashboard feeds in exactly the shapes of src/api/types.ts, for
// checking that Brain and Profiling draw them (telemetry only: no model
// output is faked). Deterministic.
import type { CorouteFeed, ExpertsFeed, Health, ProfileFeed, ProfileTurn } from "../../src/api/types";

export const ROWS = 48;
export const COLS = 128;
const N = ROWS * COLS;
const GROUPS = 12;

function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64");
/** The "skill" an expert belongs to: experts of one skill fire together. */
const group = (i: number) => ((i % COLS) * 7 + Math.floor(i / COLS)) % GROUPS;

export function health(): Health {
  return {
    status: "ok",
    model: "qwen3-30b-a3b",
    arch: "qwen3moe",
    kv_slots: 4,
    input_modalities: ["text"],
    continue_assistant: true,
    capabilities: ["chat", "systemone"],
    reasoning: "optional",
    moe: { rows: ROWS, cols: COLS, layers: Array.from({ length: ROWS }, (_, i) => i), experts_per_token: 8, shared_experts: 0 },
    scheduler: { active: 1, queued: 0, capacity: 4, max_queue: 8, queue_timeout_seconds: 300, admitted: 42, completed: 41, failed: 0, rejected: 0, timed_out: 0, cancelled: 1 },
    tiers: { vram: 0, ram: 2900, pinned: 700, disk: N - 3600, vram_gb: 0, ram_gb: 5.1, pinned_gb: 1.2, dense_gb: 1.6 },
    hwinfo: { cores: 16, ram_total_gb: 31.2, ram_avail_gb: 12.4, gpus: 0, vram_total_gb: 0, cpu: "AMD Ryzen 9 7950X 16-Core Processor", gpu: "" },
    cache: { budget_gb: 6.5, hit_rate: 0.912, prefetch_hit_rate: 0.74, bytes_read: 38.2e9 },
  };
}

export function experts(seq: number, withCounts: boolean): ExpertsFeed {
  const r = rng(7);
  const map = new Uint8Array(N);
  const counts = new Uint8Array(N * 4);
  const dv = new DataView(counts.buffer);
  for (let i = 0; i < N; i++) {
    const pop = Math.pow(r(), 3); // few hot, many cold
    const heat = Math.min(63, Math.floor(pop * 30 + (group(i) < 3 ? 8 : 0)));
    const tier = heat > 26 ? 3 : heat > 12 ? 1 : 0;
    map[i] = (tier << 6) | heat;
    dv.setUint32(i * 4, Math.floor(2 ** (heat / 2.5)), true);
  }
  // This step's hits: one skill, 8 experts in each layer.
  const hits = new Uint8Array(Math.ceil(N / 8));
  const rs = rng(1000 + seq);
  const g = seq % GROUPS;
  for (let row = 0; row < ROWS; row++) {
    let lit = 0;
    for (let tries = 0; lit < 8 && tries < 400; tries++) {
      const col = Math.floor(rs() * COLS);
      const i = row * COLS + col;
      if (group(i) !== g && rs() < 0.85) continue;
      hits[i >> 3] |= 1 << (i & 7);
      lit++;
    }
  }
  const feed: ExpertsFeed = { v: 1, rows: ROWS, cols: COLS, layers: Array.from({ length: ROWS }, (_, i) => i), seq, map: b64(map), hits: b64(hits), tokens: 51234 + seq * 6 };
  if (withCounts) feed.counts = b64(counts);
  return feed;
}

export function coroute(k = 8): CorouteFeed {
  const r = rng(99);
  const nbr = new Uint8Array(N * k * 4);
  const dv = new DataView(nbr.buffer);
  const w = new Uint8Array(N * k);
  const byGroupRow = new Map<string, number[]>();
  for (let i = 0; i < N; i++) {
    const key = `${group(i)}:${Math.floor(i / COLS)}`;
    (byGroupRow.get(key) ?? byGroupRow.set(key, []).get(key)!).push(i);
  }
  for (let i = 0; i < N; i++) {
    const row = Math.floor(i / COLS);
    for (let s = 0; s < k; s++) {
      const dr = Math.floor(r() * 3) - 1;
      const rr = Math.min(ROWS - 1, Math.max(0, row + dr));
      const gg = r() < 0.9 ? group(i) : Math.floor(r() * GROUPS);
      const pool = byGroupRow.get(`${gg}:${rr}`) ?? [i];
      const j = pool[Math.floor(r() * pool.length)];
      dv.setUint32((i * k + s) * 4, j === i ? 0xffffffff : j, true);
      w[i * k + s] = j === i ? 0 : Math.floor(60 + r() * 195);
    }
  }
  return { v: 1, rows: ROWS, cols: COLS, k, tokens: 51234, nbr: b64(nbr), w: b64(w) };
}

export function profile(): ProfileFeed {
  const r = rng(5);
  const turns: ProfileTurn[] = [];
  for (let i = 0; i < 24; i++) {
    const completion = Math.floor(60 + r() * 400);
    const warm = Math.min(1, i / 10);
    const perTok = 0.045 - 0.02 * warm + r() * 0.006;
    const wall = completion * perTok + 0.3 + r() * 0.4;
    const wait = wall * (0.35 - 0.25 * warm) * (0.8 + r() * 0.4);
    const matmul = wall * 0.32;
    const attn = wall * 0.14;
    const head = wall * 0.06;
    turns.push({
      id: 100 + i,
      t: 1764470000 + i * 40,
      slot: i % 4,
      wall_s: wall,
      prompt_tokens: Math.floor(40 + r() * 900),
      completion_tokens: completion,
      prefill_s: 0.2 + r() * 0.6,
      expert_disk_s: wait * 1.6,
      expert_wait_s: wait,
      expert_matmul_s: matmul,
      attention_s: attn,
      lm_head_s: head,
      forwards: completion + 1,
      bytes_read: Math.floor(wait * 2.1e9),
      cache_hit_rate: 0.6 + 0.33 * warm,
      prefetch_hit_rate: 0.5 + 0.25 * warm,
    });
  }
  return { seq: turns.length, turns };
}
