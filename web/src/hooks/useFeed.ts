// Polls a dashboard feed while the page that needs it is open. `null` means
// the server has no such feed (or is offline); polling then slows down.
import { useState } from "react";
import { getFeed } from "../api/client";
import type { Backoff } from "../lib/poll";
import { useConnection } from "../stores/connection";
import { useAuth } from "../stores/auth";
import { usePoll } from "./usePoll";

/** A feed that does not answer is asked 2×, 4×, 8×, then 16× less often (at most every 30 s). */
export const FEED_BACKOFF: Backoff = { maxMs: 30_000, maxDoublings: 4 };

export interface FeedState<T> {
  data: T | null;
  /** true once the first answer (or failure) came back. */
  settled: boolean;
  /** The server answered but has no such feed / an unreadable one. */
  missing: boolean;
}

export function useFeed<T>(path: string, parse: (v: unknown) => T | null, everyMs: number, enabled = true): FeedState<T> {
  const base = useConnection((s) => s.base);
  const epoch = useAuth((s) => s.epoch);
  const [state, setState] = useState<FeedState<T>>({ data: null, settled: false, missing: false });
  usePoll(
    async (signal) => {
      let next: FeedState<T>;
      try {
        const raw = await getFeed(path, signal);
        const data = raw === null ? null : parse(raw);
        next = { data, settled: true, missing: data === null };
      } catch {
        next = { data: null, settled: true, missing: false };
      }
      if (signal.aborted) return "stop";
      setState((prev) => (next.data === null && prev.data === null && prev.settled && prev.missing === next.missing ? prev : next));
      return next.data === null ? "miss" : "hit";
    },
    { intervalMs: everyMs, backoff: FEED_BACKOFF, enabled, restartKey: `${path} ${base} ${epoch}` },
  );
  return state;
}
