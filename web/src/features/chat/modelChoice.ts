// Chat's model picker: which models a request may name (GET /v1/models, and on
// colibri GET /api/models for what is loaded, loading or only on disk), which one
// Chat sends, and the user's choice, remembered in localStorage.
import { create } from "zustand";
import { loadJSON, saveJSON } from "../../lib/storage";
import type { ModelState, ModelsFeed } from "../models/models";

export interface ModelOption {
  id: string;
  /** From /api/models; null when the server only lists ids (/v1/models). */
  state: ModelState | null;
}

const RANK: Record<ModelState, number> = { active: 0, loaded: 1, loading: 1, available: 2 };

/**
 * The models a request may name: /api/models' rows that run (or likely run), then ids that only
 * /v1/models lists; the active one first, then loaded ones, then the rest, by id within each.
 */
export function modelOptions(listed: string[], feed: ModelsFeed | null): ModelOption[] {
  const out = new Map<string, ModelOption>();
  for (const r of feed?.models ?? []) {
    if (r.runnable === false) continue;
    const loading = feed?.loading?.model === r.id;
    out.set(r.id, { id: r.id, state: loading ? "loading" : r.state });
  }
  for (const id of listed) if (!out.has(id)) out.set(id, { id, state: null });
  const rank = (o: ModelOption) => (o.state ? RANK[o.state] : 3);
  return [...out.values()].sort((a, b) => rank(a) - rank(b) || a.id.localeCompare(b.id));
}

/**
 * The model Chat sends: the user's choice when this server has it, else the one the server
 * serves (/health), else the first it lists. The choice is kept either way (another server may have it).
 */
export function effectiveModel(chosen: string | null, options: ModelOption[], serverModel: string | null): string | null {
  if (chosen && options.some((o) => o.id === chosen)) return chosen;
  return serverModel ?? options[0]?.id ?? null;
}

/** What the picker says of a model besides its id. */
export function stateLabel(o: ModelOption): string {
  if (o.state === "active") return "loaded · active";
  if (o.state === "loaded") return "loaded";
  if (o.state === "loading") return "loading…";
  if (o.state === "available") return "not loaded";
  return "";
}

/** Whether picking this model should load it now (it is on disk, not in memory). */
export function needsLoad(o: ModelOption | undefined): boolean {
  return o?.state === "available";
}

const KEY = "colibri.chatModel";

interface ChatModelState {
  /** The model the user picked; null: the server's. */
  chosen: string | null;
  /** The latest options the Chat page saw (useChat reads them when it sends). */
  options: ModelOption[];
  choose: (id: string | null) => void;
  setOptions: (options: ModelOption[]) => void;
}

export const useChatModel = create<ChatModelState>((set) => ({
  chosen: loadJSON<{ chosen: string | null }>(KEY, { chosen: null }).chosen,
  options: [],
  choose: (id) => {
    set({ chosen: id });
    saveJSON(KEY, { chosen: id });
  },
  setOptions: (options) => set({ options }),
}));
