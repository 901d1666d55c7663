// User settings, saved in localStorage (never the API key).
import { create } from "zustand";
import { loadJSON, saveJSON } from "../lib/storage";

export type ThemePref = "system" | "light" | "dark";
export type Page = "chat" | "systemone" | "brain" | "profiling" | "settings";
export const PAGES: Page[] = ["chat", "systemone", "brain", "profiling", "settings"];

export interface Settings {
  theme: ThemePref;
  /** API base URL override ("" = the rule of notes §5). */
  apiBase: string;
  temperature: number;
  maxTokens: number;
  systemPrompt: string;
  /** Reasoning on/off; null = the model's default. */
  thinking: boolean | null;
}

export const SETTINGS_DEFAULT: Settings = {
  theme: "system",
  apiBase: "",
  temperature: 0.7,
  maxTokens: 4096,
  systemPrompt: "",
  thinking: null,
};

const KEY = "colibri.settings";

interface SettingsState extends Settings {
  page: Page;
  setPage: (p: Page) => void;
  update: (patch: Partial<Settings>) => void;
  reset: () => void;
}

function pageFromHash(): Page {
  const h = (globalThis.location?.hash ?? "").replace(/^#\/?/, "") as Page;
  return PAGES.includes(h) ? h : "chat";
}

export const useSettings = create<SettingsState>((set, get) => ({
  ...loadJSON<Settings>(KEY, SETTINGS_DEFAULT),
  page: pageFromHash(),
  setPage: (page) => {
    set({ page });
    if (globalThis.location && globalThis.history) globalThis.history.replaceState(null, "", `#${page}`);
  },
  update: (patch) => {
    set(patch);
    const { theme, apiBase, temperature, maxTokens, systemPrompt, thinking } = { ...get(), ...patch };
    saveJSON(KEY, { theme, apiBase, temperature, maxTokens, systemPrompt, thinking });
  },
  reset: () => {
    set(SETTINGS_DEFAULT);
    saveJSON(KEY, SETTINGS_DEFAULT);
  },
}));
