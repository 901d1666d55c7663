// Polls a dashboard feed while the page that needs it is open. `null` means
// the server has no such feed (or is offline); polling then slows down.
import { useEffect, useRef, useState } from "react";
import { getFeed } from "../api/client";
import { useConnection } from "../stores/connection";
import { useAuth } from "../stores/auth";

export interface PollState<T> {
  data: T | null;
  /** true once the first answer (or failure) came back. */
  settled: boolean;
  /** The server answered but has no such feed / an unreadable one. */
  missing: boolean;
}

export function usePoll<T>(path: string, parse: (v: unknown) => T | null, everyMs: number, enabled = true): PollState<T> {
  const base = useConnection((s) => s.base);
  const epoch = useAuth((s) => s.epoch);
  const [state, setState] = useState<PollState<T>>({ data: null, settled: false, missing: false });
  const parseRef = useRef(parse);
  parseRef.current = parse;
  useEffect(() => {
    if (!enabled) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const ctl = new AbortController();
    let misses = 0;
    const tick = async () => {
      let next: PollState<T>;
      try {
        const raw = await getFeed(path, ctl.signal);
        const data = raw === null ? null : parseRef.current(raw);
        next = { data, settled: true, missing: data === null };
      } catch {
        next = { data: null, settled: true, missing: false };
      }
      if (stopped) return;
      misses = next.data === null ? misses + 1 : 0;
      setState((prev) => (next.data === null && prev.data === null && prev.settled && prev.missing === next.missing ? prev : next));
      timer = setTimeout(tick, misses === 0 ? everyMs : Math.min(30000, everyMs * 2 ** Math.min(misses, 4)));
    };
    void tick();
    return () => {
      stopped = true;
      ctl.abort();
      if (timer) clearTimeout(timer);
    };
  }, [path, everyMs, enabled, base, epoch]);
  return state;
}
