// Generations in flight: one AbortController per conversation, so Stop drops
// exactly that request, and the live stats of the answer being written.
import { create } from "zustand";
import type { StreamStats } from "../lib/chatStream";

interface Running {
  msgId: string;
  stats: StreamStats;
}

interface GenerationState {
  running: Record<string, Running>;
  start: (convId: string, msgId: string, ctl: AbortController) => void;
  progress: (convId: string, stats: StreamStats) => void;
  finish: (convId: string) => void;
  stop: (convId: string) => void;
}

const controllers = new Map<string, AbortController>();

export const useGeneration = create<GenerationState>((set, get) => ({
  running: {},
  start: (convId, msgId, ctl) => {
    controllers.get(convId)?.abort();
    controllers.set(convId, ctl);
    set({ running: { ...get().running, [convId]: { msgId, stats: { ttftMs: null, tokPerS: null, tokens: 0, exact: false } } } });
  },
  progress: (convId, stats) => {
    const r = get().running[convId];
    if (r) set({ running: { ...get().running, [convId]: { ...r, stats } } });
  },
  finish: (convId) => {
    controllers.delete(convId);
    const { [convId]: _done, ...rest } = get().running;
    set({ running: rest });
  },
  stop: (convId) => controllers.get(convId)?.abort(),
}));
