// The API key: kept in memory only (never in storage), sent as a Bearer token.
import { create } from "zustand";

interface AuthState {
  key: string | null;
  /** True when the server answered 401: the key prompt is shown. */
  needKey: boolean;
  message: string | null;
  /** Bumps when the key changes, so pollers retry at once. */
  epoch: number;
  requireKey: (message?: string) => void;
  setKey: (key: string | null) => void;
  dismiss: () => void;
}

export const useAuth = create<AuthState>((set) => ({
  key: null,
  needKey: false,
  message: null,
  epoch: 0,
  requireKey: (message) => set({ needKey: true, message: message ?? null }),
  setKey: (key) => set((s) => ({ key: key && key.trim() ? key.trim() : null, needKey: false, message: null, epoch: s.epoch + 1 })),
  dismiss: () => set({ needKey: false }),
}));
