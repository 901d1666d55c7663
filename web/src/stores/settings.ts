// User settings, saved in localStorage (never the API key).
import { create } from "zustand";
import { loadJSON, saveJSON } from "../lib/storage";

export type ThemePref = "system" | "light" | "dark";

export interface Settings {
  theme: ThemePref;
  /** API base URL override ("" = the rule of docs/dashboard-feeds.md#the-dashboard-client). */
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
  update: (patch: Partial<Settings>) => void;
  reset: () => void;
}

export const useSettings = create<SettingsState>((set, get) => ({
  ...loadJSON<Settings>(KEY, SETTINGS_DEFAULT),
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
