// The JSON the dashboard reads. Two groups:
//
// 1. The dashboard feeds (`{root}/health`, `{root}/experts`,
//    `{root}/experts/coroute`, `{root}/profile`). colibri defines them; the
//    server implements exactly these shapes (documented in web/README.md,
//    "Feeds the dashboard reads"). `{root}` is the origin without `/v1`.
//    Every field the dashboard can live without is optional, and a server that
//    lacks a feed (404, HTML, not JSON) gives an empty state, never a crash.
// 2. The OpenAI-compatible and System One shapes the dashboard sends and reads
//    (the server's contract is docs/openai-api.md and docs/system-one.md).
//
// Parsing at the boundary lives in feeds.ts; these are the shapes only.

// ---------------------------------------------------------------------------
// GET {root}/health — polled every 5 s. Always 200. Without the API key (when
// the server has one) only `status` is present; with it, everything below.

export type Tier = 0 | 1 | 2 | 3;
/** Tier codes used in the experts map: where an expert's weights are now. */
export const TIER = { disk: 0, ram: 1, vram: 2, pinned: 3 } as const;
export const TIER_NAMES = ["disk", "RAM", "VRAM", "pinned"] as const;

export interface Health {
  /** "loading" while the model loads, "ok" when it serves, "error" when the engine died. */
  status: "ok" | "loading" | "error";
  /** The served model id, the `model` every request must name. */
  model?: string;
  /** GGUF `general.architecture`, e.g. "qwen3moe", "gemma3". */
  arch?: string;
  /** Number of KV slots; `cache_slot` takes 0..kv_slots-1. */
  kv_slots?: number;
  /** Input kinds the model accepts: "text", and "image" where it can see. */
  input_modalities?: string[];
  /** Whether a trailing assistant turn is continued (COLI_CONTINUE_ASSISTANT). */
  continue_assistant?: boolean;
  /** e.g. ["chat", "systemone"]. */
  capabilities?: string[];
  /**
   * The model's reasoning mode: "none" (no reasoning), "optional" (off unless
   * `enable_thinking: true`), "default" (on unless `enable_thinking: false`).
   */
  reasoning?: "none" | "optional" | "default";
  /** The routed experts; null for a dense model. */
  moe?: HealthMoe | null;
  scheduler?: HealthScheduler;
  tiers?: HealthTiers;
  hwinfo?: HealthHwinfo;
  /** Expert-cache totals since the server started. */
  cache?: HealthCache;
  /** `coli serve --models-dir`: the model library (null without it); the Models page reads /api/models. */
  library?: HealthLibrary | null;
  /** "upstream" with `coli serve --upstream`: the engines are other servers (`upstreams`). */
  backend?: "upstream";
  upstreams?: HealthUpstream[];
  /** With `backend: "upstream"`: false unless an upstream is another colibri whose /experts is relayed. */
  routing_visible?: boolean;
}

export interface HealthUpstream {
  url: string;
  state: "up" | "down";
  models: string[];
  in_flight: number;
  requests: number;
  errors: number;
  last_error: string | null;
  colibri: boolean;
}

export interface HealthLibrary {
  active: string;
  resident: string[];
  max_models: number;
  model_ttl_seconds: number;
  loading: { model: string; phase: string; bytes_done: number; bytes_total: number; started: number } | null;
  last_error: { model: string; message: string; at: number } | null;
  switches: number;
}

export interface HealthMoe {
  /** Rows of the experts map: the sparse (MoE) layers. */
  rows: number;
  /** Routed experts per sparse layer (columns of the map). */
  cols: number;
  /** Model layer index of each row, length `rows` (dense lead layers are absent). */
  layers: number[];
  /** Experts routed per token (top-k). */
  experts_per_token: number;
  /** Shared (always-on) experts per layer, 0 when none. */
  shared_experts: number;
}

export interface HealthScheduler {
  active: number;
  queued: number;
  capacity: number;
  max_queue: number;
  queue_timeout_seconds: number;
  admitted: number;
  completed: number;
  failed: number;
  rejected: number;
  timed_out: number;
  cancelled: number;
}

/** Number of routed experts in each tier (disjoint: they sum to rows·cols) and bytes in GB. */
export interface HealthTiers {
  vram: number;
  ram: number;
  /** Experts held in RAM and never evicted (learned pins); not counted in `ram`. */
  pinned: number;
  disk: number;
  vram_gb: number;
  ram_gb: number;
  pinned_gb: number;
  /** Bytes of the dense part (always resident). */
  dense_gb?: number;
}

export interface HealthHwinfo {
  cores: number;
  ram_total_gb: number;
  ram_avail_gb: number;
  gpus: number;
  vram_total_gb: number;
  cpu: string;
  gpu: string;
}

export interface HealthCache {
  /** RAM budget for routed experts, GB. */
  budget_gb: number;
  /** Expert lookups served from RAM/VRAM ÷ all lookups; null before the first. */
  hit_rate: number | null;
  /** Prefetched experts that were then routed ÷ prefetches issued; null before the first. */
  prefetch_hit_rate: number | null;
  /** Bytes read from disk for experts since start. */
  bytes_read: number;
}

// ---------------------------------------------------------------------------
// GET {root}/experts — polled every 1.5 s while Brain is open.
// One byte per expert, base64: 100k experts ≈ 133 kB of `map` and 17 kB of
// `hits` per poll. `?counts=1` adds `counts` (polled every ~10 s for the
// tooltip and Explore). A dense model answers rows = cols = 0.

export interface ExpertsFeed {
  /** Format version, 1. */
  v: 1;
  rows: number;
  cols: number;
  /** Model layer index of each row (as HealthMoe.layers). */
  layers: number[];
  /** Increments on every routing step sampled into `hits`. */
  seq: number;
  /**
   * base64 of rows·cols bytes, row-major (layer row, then expert):
   * byte = tier << 6 | heat, tier as TIER, heat 0..63 = floor(log2(1 + h))
   * where h is the decayed routing count (half-life ≈ 256 tokens).
   */
  map: string;
  /**
   * base64 bitmap of rows·cols bits, LSB first (bit i of byte i>>3 is expert
   * i), set for experts routed in any step since the previous `seq`.
   */
  hits: string;
  /** With ?counts=1: base64 of rows·cols little-endian uint32, cumulative routing counts (saturating). */
  counts?: string;
  /** Tokens routed since start (the denominator of counts). */
  tokens?: number;
}

// GET {root}/experts/coroute?k=8 — fetched when Explore opens (and on demand).
// For every expert its k strongest co-routing partners: experts that the same
// tokens were routed to, in the same layer or in the two neighbouring ones.
// 100k experts × k=8 ≈ 4 MB raw, once.

export interface CorouteFeed {
  v: 1;
  rows: number;
  cols: number;
  /** Partners per expert. */
  k: number;
  /** Tokens observed. 0 = nothing measured yet. */
  tokens: number;
  /**
   * base64 of rows·cols·k little-endian uint32: the partner's cell index
   * (row·cols + col), strongest first; 0xFFFFFFFF pads a short list.
   */
  nbr: string;
  /**
   * base64 of rows·cols·k bytes: partner strength 1..255, scaled so that the
   * strongest pair in the feed is 255; 0 where `nbr` is padding. Strength is
   * the number of tokens routed through both experts.
   */
  w: string;
}

// GET {root}/events — optional, a server-sent-events stream. Where the server
// has it, Brain flashes every routing step as it happens instead of every
// poll; the polled feeds above stay the source of tiers, heat and turns.
//   event: routing   data: EventsRouting   (after forward passes, ≤ 10 per second)
//   event: turn      data: ProfileTurn     (when a request finishes)

export interface EventsRouting {
  seq: number;
  rows: number;
  cols: number;
  /** base64 bitmap as ExpertsFeed.hits: the experts routed in this step. */
  hits: string;
}

// ---------------------------------------------------------------------------
// GET {root}/profile — polled every 2 s while Profiling is open. The last
// 120 turns, oldest first. A turn = one request's generation on one slot.

export interface ProfileFeed {
  /** Increments when a turn is appended. */
  seq: number;
  turns: ProfileTurn[];
  /** `coli serve --upstream`: each request as the gateway timed it (no engine phases here). */
  gateway?: GatewayTurn[];
}

export interface GatewayTurn {
  id: number;
  /** Unix seconds when it ended. */
  t: number;
  upstream: string;
  queue_wait_s: number;
  /** Request sent to first text; null when none came. */
  first_output_s: number | null;
  /** Mean time between streamed chunks; null for a whole reply. */
  inter_token_s: number | null;
  wall_s: number;
  prompt_tokens: number;
  completion_tokens: number;
  finish: string;
}

export interface ProfileTurn {
  /** Unique and increasing turn number. */
  id: number;
  /** Unix time (seconds) the turn ended. */
  t: number;
  /** KV slot the turn ran in. */
  slot: number;
  wall_s: number;
  prompt_tokens: number;
  completion_tokens: number;
  /** Prefill wall time (ACCEPT to the first token). */
  prefill_s: number;
  /** Disk service time of expert reads; overlaps compute, so not part of the stack. */
  expert_disk_s: number;
  /** Compute blocked waiting for expert reads (I/O wait). */
  expert_wait_s: number;
  expert_matmul_s: number;
  attention_s: number;
  /** Optional: Gated DeltaNet models (qwen3next, qwen35moe): the linear-attention layers, apart from attention_s. */
  linear_attention_s?: number;
  lm_head_s: number;
  /** Forward passes (steps) in the turn. */
  forwards: number;
  /** Bytes read from disk for experts during the turn. */
  bytes_read: number;
  /** Expert lookups served without a read ÷ all lookups; null for a dense model. */
  cache_hit_rate: number | null;
  /** Prefetched experts that were routed ÷ prefetches issued; null when none was issued. */
  prefetch_hit_rate: number | null;
  /** Optional: prompt tokens served from the slot's cached prefix. */
  reused_tokens?: number;
  /** Optional: the finish reason ("stop", "length", "cancelled", …). */
  finish?: string;
  /** Optional: speculative decoding's tokens drafted during the turn, and those the model kept. */
  draft_tokens?: number;
  draft_accepted?: number;
  /** Optional, with draft_tokens when the turn drafted: what drafted (/health's `speculative.drafter`). */
  drafter?: Drafter;
}

/** What drafts for speculative decoding: the model file's MTP block, prompt lookup, or a separate draft model. */
export type Drafter = "mtp" | "lookup" | "model";

// ---------------------------------------------------------------------------
// OpenAI-compatible chat.

export interface ModelsList {
  object: "list";
  data: { id: string; object: "model"; owned_by?: string; input_modalities?: string[]; capabilities?: string[] }[];
}

export type ChatContentPart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string } };

export interface ChatMessageIn {
  role: "system" | "user" | "assistant";
  content: string | ChatContentPart[];
  reasoning_content?: string;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessageIn[];
  stream: true;
  stream_options: { include_usage: true };
  temperature?: number;
  max_completion_tokens?: number;
  enable_thinking?: boolean;
  cache_slot?: number;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface ChatChunk {
  id?: string;
  choices: {
    index: number;
    delta: { role?: string; content?: string | null; reasoning_content?: string | null };
    finish_reason: string | null;
  }[];
  usage?: Usage | null;
}

export interface ApiErrorBody {
  error: { message: string; type?: string; param?: string | null; code?: string | null };
}

// ---------------------------------------------------------------------------
// System One (POST /v1/systemone), docs/system-one.md.

export type SystemOneQuestion =
  | { type: "choice"; instructions?: string; criteria: Record<string, string | null> }
  | { type: "noul"; instructions?: string; criteria?: { true?: string; false?: string } }
  | { type: "score"; instructions?: string; criteria: (string | null)[] };

export interface SystemOneRequest {
  model: string;
  state: string;
  questions: Record<string, SystemOneQuestion>;
}

export type SystemOneAnswer =
  | { type: "noul"; noul: number }
  | { type: "choice"; choice: string; probabilities: Record<string, number>; confidence: number }
  | {
      type: "score";
      score: number;
      legend: Record<string, string>;
      probabilities: Record<string, number>;
      confidence: number;
    };

export interface SystemOneReply {
  id: string;
  model: string;
  answers: Record<string, SystemOneAnswer>;
  usage: { input_tokens: number; output_tokens: number; cost: number };
}
