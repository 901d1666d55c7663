// A loop that asks, waits and asks again: the plain interval after an answer,
// longer after each miss in a row (so a page whose server is away stays
// quiet), until it is stopped. The next try is scheduled only once the last
// one has finished, so tries never overlap. hooks/usePoll.ts runs it while a
// component is mounted.

/** How the wait grows while tries go unanswered. */
export interface Backoff {
  /** The longest wait between two tries. */
  maxMs: number;
  /** At most this many doublings of the interval (default: as many as fit under maxMs). */
  maxDoublings?: number;
  /** Misses in a row retried at the plain interval before the wait starts doubling (default 0). */
  graceMisses?: number;
}

/**
 * What one try came to:
 * - `hit`: an answer; the next try after the plain interval.
 * - `miss`: no answer; the wait grows.
 * - `lost`: an answer that then broke off (a stream cut mid-way): the first miss after a hit.
 * - `stop`: nothing to ask for here (the server has no such feed); no more tries.
 */
export type Outcome = "hit" | "miss" | "lost" | "stop";

/**
 * One try; `n` counts the loop's tries from 0 (for "every sixth poll also asks for…").
 * The signal aborts when the loop stops; a try must not commit anything after that.
 */
export type Try = (signal: AbortSignal, n: number) => Promise<Outcome>;

/** The wait before the next try after `misses` misses in a row. */
export function backoffDelay(intervalMs: number, misses: number, backoff: Backoff): number {
  if (misses <= 0) return intervalMs;
  const doublings = Math.min(Math.max(0, misses - (backoff.graceMisses ?? 0)), backoff.maxDoublings ?? Infinity);
  return Math.min(backoff.maxMs, intervalMs * 2 ** doublings);
}

/** Starts the loop with a try at once; returns the function that stops it (and aborts a try in flight). */
export function startPoll(tryOnce: Try, intervalMs: number, backoff: Backoff): () => void {
  const ctl = new AbortController();
  let timer: ReturnType<typeof setTimeout> | null = null;
  let misses = 0;
  let tries = 0;
  const run = async () => {
    timer = null;
    let outcome: Outcome;
    try {
      outcome = await tryOnce(ctl.signal, tries++);
    } catch {
      outcome = "miss"; // a try that throws counts as unanswered
    }
    if (ctl.signal.aborted || outcome === "stop") return;
    misses = outcome === "hit" ? 0 : outcome === "lost" ? 1 : misses + 1;
    timer = setTimeout(run, backoffDelay(intervalMs, misses, backoff));
  };
  void run();
  return () => {
    ctl.abort();
    if (timer) clearTimeout(timer);
  };
}
