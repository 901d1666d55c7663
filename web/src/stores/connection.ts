// The server this page talks to: its base URL, whether it answers, what
// /health says and which model it serves. Polled by useServerPolling.
import { create } from "zustand";
import { apiBase } from "../api/connection";
import type { Health } from "../api/types";

export type LinkStatus = "connecting" | "online" | "offline";

interface ConnectionState {
  base: string;
  status: LinkStatus;
  health: Health | null;
  /** The model id from /health or /v1/models; null until known. */
  model: string | null;
  /** Input modalities from /v1/models (a generic OpenAI server has no /health). */
  modalities: string[] | null;
  error: string | null;
  setBase: (override: string) => void;
  patch: (p: Partial<Omit<ConnectionState, "setBase" | "patch">>) => void;
}

function pageLocation() {
  const l = globalThis.location;
  return l ? { protocol: l.protocol, host: l.host, port: l.port, origin: l.origin } : { protocol: "file:", host: "", port: "", origin: "" };
}

export const useConnection = create<ConnectionState>((set) => ({
  base: apiBase(pageLocation(), null),
  status: "connecting",
  health: null,
  model: null,
  modalities: null,
  error: null,
  setBase: (override) => set({ base: apiBase(pageLocation(), override), status: "connecting", health: null, model: null, modalities: null }),
  patch: (p) => set(p),
}));
