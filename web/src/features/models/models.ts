// The Models page's data: GET /api/models parsed at the boundary (the server's
// colibri/api/models_api.py is the contract), and the words and numbers a row shows.

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

export type ModelState = "active" | "loaded" | "loading" | "available";

export interface ModelPlan {
  placement: string;
  fits: boolean;
  reason: string;
  ctx: number;
  ramBytes: number;
  ramAvailable: number;
}

export interface ModelRow {
  id: string;
  state: ModelState;
  arch: string | null;
  path: string | null;
  source: string | null;
  size: number | null;
  nParams: number | null;
  quantTypes: string[];
  ctxTrain: number | null;
  /** true: runs; false: cannot (reason says why); null: likely (not loaded by this build yet). */
  runnable: boolean | null;
  reason: string;
  plan: ModelPlan | null;
}

export interface Loading {
  model: string;
  phase: string;
  bytesDone: number;
  bytesTotal: number;
}

export interface ModelsFeed {
  /** false: the server serves one model (started without --models-dir). */
  library: boolean;
  active: string | null;
  models: ModelRow[];
  loading: Loading | null;
  lastError: { model: string; message: string } | null;
}

const STATES: ModelState[] = ["active", "loaded", "loading", "available"];

function parsePlan(v: unknown): ModelPlan | null {
  if (!isObj(v) || typeof v.placement !== "string") return null;
  return {
    placement: v.placement,
    fits: v.fits === true,
    reason: str(v.reason) ?? "",
    ctx: num(v.ctx) ?? 0,
    ramBytes: num(v.ram_bytes) ?? 0,
    ramAvailable: num(v.ram_available) ?? 0,
  };
}

function parseRow(v: unknown): ModelRow | null {
  if (!isObj(v) || typeof v.id !== "string") return null;
  const state = STATES.includes(v.state as ModelState) ? (v.state as ModelState) : "available";
  return {
    id: v.id,
    state,
    arch: str(v.arch),
    path: str(v.path),
    source: str(v.source),
    size: num(v.size),
    nParams: num(v.n_params),
    quantTypes: Array.isArray(v.quant_types) ? v.quant_types.filter((t): t is string => typeof t === "string") : [],
    ctxTrain: num(v.n_ctx_train),
    runnable: v.runnable === true ? true : v.runnable === false ? false : null,
    reason: str(v.reason) ?? "",
    plan: parsePlan(v.plan),
  };
}

export function parseModels(v: unknown): ModelsFeed | null {
  if (!isObj(v) || !Array.isArray(v.models)) return null;
  const pool = isObj(v.pool) ? v.pool : null;
  const l = pool && isObj(pool.loading) ? pool.loading : null;
  const e = pool && isObj(pool.last_error) ? pool.last_error : null;
  return {
    library: v.library === true,
    active: str(v.active),
    models: v.models.map(parseRow).filter((r): r is ModelRow => r !== null),
    loading: l && typeof l.model === "string" ? { model: l.model, phase: str(l.phase) ?? "", bytesDone: num(l.bytes_done) ?? 0, bytesTotal: num(l.bytes_total) ?? 0 } : null,
    lastError: e && typeof e.model === "string" ? { model: e.model, message: str(e.message) ?? "" } : null,
  };
}

/** How far a load is, 0..1; null when nothing says (planning, or opening a streamed model). */
export function loadFraction(l: Loading | null): number | null {
  if (!l || l.bytesTotal <= 0 || l.phase === "planning") return null;
  if (l.phase === "opening") return 1;
  return Math.min(1, Math.max(0, l.bytesDone / l.bytesTotal));
}

/** The short word of the Runs column. */
export function runsLabel(r: ModelRow): "runs" | "likely" | "cannot run" {
  return r.runnable === true ? "runs" : r.runnable === false ? "cannot run" : "likely";
}

/** One line of the plan: "resident · 1.2 GB of RAM" (or why it does not fit). */
export function planLine(p: ModelPlan | null, fmtBytes: (n: number) => string): string {
  if (!p) return "—";
  const where = p.placement === "streaming" ? "experts stream from disk" : "resident in RAM";
  return `${where} · ${fmtBytes(p.ramBytes)}${p.fits ? "" : " (does not fit)"}`;
}

/** Loaded models first (the active one on top), then the ones that run, then the rest; by id within each. */
export function sortRows(rows: ModelRow[]): ModelRow[] {
  const rank = (r: ModelRow) => (r.state === "active" ? 0 : r.state === "loaded" || r.state === "loading" ? 1 : r.runnable === false ? 3 : 2);
  return [...rows].sort((a, b) => rank(a) - rank(b) || a.id.localeCompare(b.id));
}

/** "1.54B", "494M", "91K". */
export function fmtParams(n: number | null): string {
  if (!n) return "—";
  for (const [unit, size] of [["B", 1e9], ["M", 1e6], ["K", 1e3]] as const) if (n >= size) return `${(n / size).toFixed(n >= size * 10 ? 0 : 1)}${unit}`;
  return String(n);
}
