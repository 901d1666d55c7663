// The live experts feed, polled every 1.5 s while Brain is open (notes §5),
// with cumulative counts every ~9 s; each new hits frame also feeds the
// client-side co-routing measure used when the server has no coroute feed.
import { useEffect, useRef, useState } from "react";
import { getFeed } from "../../api/client";
import { parseExperts, type ExpertsFrame } from "../../api/feeds";
import { CoFire, litIndices } from "../../lib/cofire";
import { useConnection } from "../../stores/connection";
import { useAuth } from "../../stores/auth";

export const EXPERTS_MS = 1500;
const COUNTS_EVERY = 6;

export interface ExpertsState {
  frame: ExpertsFrame | null;
  counts: Uint32Array | null;
  /** Tokens routed since start (sent with the counts; the last value is kept). */
  tokens: number | null;
  settled: boolean;
  /** Answered, but with no experts feed. */
  missing: boolean;
  cofire: CoFire | null;
}

export function useExperts(): ExpertsState {
  const base = useConnection((s) => s.base);
  const epoch = useAuth((s) => s.epoch);
  const [st, setSt] = useState<ExpertsState>({ frame: null, counts: null, tokens: null, settled: false, missing: false, cofire: null });
  const cofire = useRef<CoFire | null>(null);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const ctl = new AbortController();
    let n = 0;
    let misses = 0;
    let lastSeq = -1;
    const tick = async () => {
      const wantCounts = n % COUNTS_EVERY === 0;
      n++;
      let frame: ExpertsFrame | null = null;
      let missing = false;
      try {
        const raw = await getFeed(wantCounts ? "experts?counts=1" : "experts", ctl.signal);
        frame = raw === null ? null : parseExperts(raw);
        missing = frame === null;
      } catch {
        /* offline */
      }
      if (stopped) return;
      if (frame) {
        if (!cofire.current || cofire.current.rows !== frame.rows || cofire.current.cols !== frame.cols) cofire.current = new CoFire(frame.rows, frame.cols);
        if (frame.seq !== lastSeq && lastSeq !== -1) cofire.current.add(litIndices(frame.hits, frame.rows * frame.cols));
        lastSeq = frame.seq;
      }
      const f = frame;
      setSt((prev) => {
        if (!f && !prev.frame && prev.settled && prev.missing === missing) return prev;
        return {
          frame: f,
          counts: f?.counts ?? (f ? prev.counts : null),
          tokens: f?.tokens ?? (f ? prev.tokens : null),
          settled: true,
          missing,
          cofire: cofire.current,
        };
      });
      misses = frame ? 0 : misses + 1;
      timer = setTimeout(tick, misses === 0 ? EXPERTS_MS : Math.min(30000, EXPERTS_MS * 2 ** Math.min(misses, 4)));
    };
    void tick();
    return () => {
      stopped = true;
      ctl.abort();
      if (timer) clearTimeout(timer);
    };
  }, [base, epoch]);
  return st;
}
