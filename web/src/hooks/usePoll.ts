// Runs lib/poll.ts's loop while a component is mounted: one try at once, the
// next one interval after an answer, longer after misses in a row. The loop
// stops on unmount (aborting the try in flight) and starts over, with no
// misses counted, when `enabled` turns on or `restartKey` changes. The try
// itself may change from render to render: the loop always calls the latest.
import { useEffect, useRef } from "react";
import { startPoll, type Backoff, type Try } from "../lib/poll";

export interface PollOptions {
  intervalMs: number;
  backoff: Backoff;
  /** false: no tries (default true). */
  enabled?: boolean;
  /** The loop starts over when this changes (say, the server's address and the API key's epoch). */
  restartKey?: string;
}

export function usePoll(tryOnce: Try, { intervalMs, backoff, enabled = true, restartKey = "" }: PollOptions): void {
  const latest = useRef(tryOnce);
  latest.current = tryOnce;
  const { maxMs, maxDoublings, graceMisses } = backoff;
  useEffect(() => {
    if (!enabled) return;
    return startPoll((signal, n) => latest.current(signal, n), intervalMs, { maxMs, maxDoublings, graceMisses });
  }, [enabled, intervalMs, maxMs, maxDoublings, graceMisses, restartKey]);
}
