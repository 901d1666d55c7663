// The dashboard feeds, parsed at the boundary: anything that is not the
// documented shape (types.ts) becomes null, which the pages show as an empty
// state. Compact fields are decoded here (base64 → typed arrays).

import type { Drafter, GatewayTurn, Health, ProfileFeed, ProfileTurn } from "./types";
import { base64ToBytes, u32le } from "../lib/bytes";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const num = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const int = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;

export function parseHealth(v: unknown): Health | null {
  if (!isObj(v) || typeof v.status !== "string") return null;
  // Unknown fields are kept: the server may say more than this client reads.
  const h = { ...v } as unknown as Health;
  if (h.kv_slots !== undefined && !int(h.kv_slots)) delete h.kv_slots;
  if (h.input_modalities !== undefined && !Array.isArray(h.input_modalities)) delete h.input_modalities;
  if (h.moe !== undefined && h.moe !== null && !(isObj(h.moe) && int(h.moe.rows) && int(h.moe.cols))) delete h.moe;
  for (const k of ["scheduler", "tiers", "hwinfo", "cache"] as const) if (h[k] !== undefined && !isObj(h[k])) delete h[k];
  return h;
}

export interface ExpertsFrame {
  rows: number;
  cols: number;
  layers: number[];
  seq: number;
  /** rows·cols bytes: tier << 6 | heat. */
  map: Uint8Array;
  /** LSB-first bitmap of the experts routed since the previous seq. */
  hits: Uint8Array;
  counts: Uint32Array | null;
  tokens: number | null;
}

export function parseExperts(v: unknown): ExpertsFrame | null {
  if (!isObj(v) || !int(v.rows) || !int(v.cols) || !num(v.seq)) return null;
  const rows = v.rows;
  const cols = v.cols;
  const n = rows * cols;
  try {
    const map = typeof v.map === "string" ? base64ToBytes(v.map) : new Uint8Array(0);
    const hits = typeof v.hits === "string" ? base64ToBytes(v.hits) : new Uint8Array(0);
    if (map.length !== n || hits.length < Math.ceil(n / 8)) return null;
    let counts: Uint32Array | null = null;
    if (typeof v.counts === "string") {
      const c = u32le(base64ToBytes(v.counts));
      if (c.length === n) counts = c;
    }
    const layers = Array.isArray(v.layers) && v.layers.length === rows && v.layers.every(int) ? (v.layers as number[]) : Array.from({ length: rows }, (_, i) => i);
    return { rows, cols, layers, seq: v.seq, map, hits, counts, tokens: num(v.tokens) ? v.tokens : null };
  } catch {
    return null; // bad base64
  }
}

/** Each expert's k strongest co-routing partners (the coroute feed decoded, or co-firing measured here). */
export interface CoGraph {
  /** Number of experts (cells). */
  n: number;
  /** Partners per expert. */
  k: number;
  /** n·k partner cell indices; 0xFFFFFFFF (or any index ≥ n) means none. */
  nbr: Uint32Array;
  /** n·k strengths; 0 means none. */
  w: Uint8Array | Float32Array;
}

export interface CorouteData {
  rows: number;
  cols: number;
  tokens: number;
  graph: CoGraph;
}

export function parseCoroute(v: unknown): CorouteData | null {
  if (!isObj(v) || !int(v.rows) || !int(v.cols) || !int(v.k) || typeof v.nbr !== "string" || typeof v.w !== "string") return null;
  const n = v.rows * v.cols;
  try {
    const nbr = u32le(base64ToBytes(v.nbr));
    const w = base64ToBytes(v.w);
    if (nbr.length !== n * v.k || w.length !== n * v.k) return null;
    return { rows: v.rows, cols: v.cols, tokens: num(v.tokens) ? v.tokens : 0, graph: { n, k: v.k, nbr, w } };
  } catch {
    return null;
  }
}

const DRAFTERS: readonly Drafter[] = ["mtp", "lookup", "model"];
const isDrafter = (x: unknown): x is Drafter => DRAFTERS.includes(x as Drafter);

const TURN_NUMBERS: (keyof ProfileTurn)[] = [
  "wall_s",
  "prompt_tokens",
  "completion_tokens",
  "expert_disk_s",
  "expert_wait_s",
  "expert_matmul_s",
  "attention_s",
  "lm_head_s",
];

/** `coli serve --upstream`'s /profile (source "gateway"): the requests as the gateway timed them. */
function parseGatewayTurns(rows: unknown[]): GatewayTurn[] {
  const opt = (x: unknown) => (num(x) ? x : null);
  return rows.filter(isObj).filter((t) => num(t.id) && num(t.wall_s) && num(t.queue_wait_s)).map((t) => ({
    id: t.id as number,
    t: num(t.t) ? t.t : 0,
    upstream: typeof t.upstream === "string" ? t.upstream : "",
    queue_wait_s: t.queue_wait_s as number,
    first_output_s: opt(t.first_output_s),
    inter_token_s: opt(t.inter_token_s),
    wall_s: t.wall_s as number,
    prompt_tokens: num(t.prompt_tokens) ? t.prompt_tokens : 0,
    completion_tokens: num(t.completion_tokens) ? t.completion_tokens : 0,
    finish: typeof t.finish === "string" ? t.finish : "",
  }));
}

export function parseProfile(v: unknown): ProfileFeed | null {
  if (!isObj(v) || !Array.isArray(v.turns)) return null;
  if (v.source === "gateway") {
    const gateway = parseGatewayTurns(v.turns);
    return { seq: num(v.seq) ? v.seq : gateway.length, turns: [], gateway };
  }
  const turns: ProfileTurn[] = [];
  v.turns.forEach((t, i) => {
    if (!isObj(t) || !TURN_NUMBERS.every((k) => num(t[k]))) return;
    const rate = (x: unknown) => (num(x) ? x : null);
    turns.push({
      id: num(t.id) ? t.id : i,
      t: num(t.t) ? t.t : 0,
      slot: num(t.slot) ? t.slot : 0,
      wall_s: t.wall_s as number,
      prompt_tokens: t.prompt_tokens as number,
      completion_tokens: t.completion_tokens as number,
      prefill_s: num(t.prefill_s) ? t.prefill_s : 0,
      expert_disk_s: t.expert_disk_s as number,
      expert_wait_s: t.expert_wait_s as number,
      expert_matmul_s: t.expert_matmul_s as number,
      attention_s: t.attention_s as number,
      lm_head_s: t.lm_head_s as number,
      forwards: num(t.forwards) ? t.forwards : 0,
      bytes_read: num(t.bytes_read) ? t.bytes_read : 0,
      cache_hit_rate: rate(t.cache_hit_rate),
      prefetch_hit_rate: rate(t.prefetch_hit_rate),
      ...(num(t.linear_attention_s) ? { linear_attention_s: t.linear_attention_s } : {}),
      ...(num(t.draft_tokens) && num(t.draft_accepted)
        ? {
            draft_tokens: t.draft_tokens,
            draft_accepted: t.draft_accepted,
            ...(isDrafter(t.drafter) ? { drafter: t.drafter } : {}),
          }
        : {}),
    });
  });
  return { seq: num(v.seq) ? v.seq : turns.length, turns };
}

/** A turn's phases for the stack: other = max(0, wall − wait − matmul − attention − linear attention − head). */
export function turnPhases(t: ProfileTurn) {
  const linear = t.linear_attention_s ?? 0;
  const other = Math.max(0, t.wall_s - t.expert_wait_s - t.expert_matmul_s - t.attention_s - linear - t.lm_head_s);
  return { wait: t.expert_wait_s, matmul: t.expert_matmul_s, attention: t.attention_s, linear, head: t.lm_head_s, other };
}

/** Drafted tokens the model kept ÷ drafted, of a turn that drafted; null otherwise. */
export function turnAcceptance(t: ProfileTurn): number | null {
  return t.draft_tokens && t.draft_accepted !== undefined ? t.draft_accepted / t.draft_tokens : null;
}

/** Tokens per decode step of a turn that drafted (each step keeps one token plus the drafts it accepted);
 * null when nothing was drafted. */
export function turnTokensPerStep(t: ProfileTurn): number | null {
  if (!t.draft_tokens || t.draft_accepted === undefined) return null;
  const steps = t.completion_tokens - t.draft_accepted;
  return steps > 0 ? t.completion_tokens / steps : null;
}

/** tok/s of a turn, prefill included (completion ÷ wall). */
export function turnTokPerS(t: ProfileTurn): number {
  return t.wall_s > 0 ? t.completion_tokens / t.wall_s : 0;
}

/** One `routing` event of /events, decoded; null when it does not fit the current map. */
export function parseRoutingEvent(data: string, rows: number, cols: number): { seq: number; hits: Uint8Array } | null {
  try {
    const v = JSON.parse(data) as unknown;
    if (!isObj(v) || !num(v.seq) || v.rows !== rows || v.cols !== cols || typeof v.hits !== "string") return null;
    const hits = base64ToBytes(v.hits);
    return hits.length >= Math.ceil((rows * cols) / 8) ? { seq: v.seq, hits } : null;
  } catch {
    return null;
  }
}
