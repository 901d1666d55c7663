// The live experts feed, polled every 1.5 s while Brain is open (docs/dashboard-feeds.md#the-dashboard-client),
// with cumulative counts every ~9 s. Where the server streams routing steps
// (GET /events), those drive the flashes as they happen and the polls bring
// tiers and heat only. Every new step also feeds the client-side co-routing
// measure used when the server has no coroute feed.
import { useRef, useState } from "react";
import { getFeed, openFeedStream } from "../../api/client";
import { readSSE } from "../../api/sse";
import { parseExperts, parseRoutingEvent, type ExpertsFrame } from "../../api/feeds";
import type { Backoff } from "../../lib/poll";
import { FEED_BACKOFF } from "../../hooks/useFeed";
import { usePoll } from "../../hooks/usePoll";
import { CoFire, litIndices } from "./cofire";
import { useConnection } from "../../stores/connection";
import { useAuth } from "../../stores/auth";

export const EXPERTS_MS = 1500;
const COUNTS_EVERY = 6;
/** The /events stream is reopened 5 s after it ends, 10, 20, 40, then 60 s after each failure in a row. */
const EVENTS_RETRY_MS = 5000;
const EVENTS_BACKOFF: Backoff = { maxMs: 60_000 };

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

const EMPTY: ExpertsState = { frame: null, counts: null, tokens: null, settled: false, missing: false, cofire: null };

export function useExperts(): ExpertsState {
  const base = useConnection((s) => s.base);
  const epoch = useAuth((s) => s.epoch);
  const [st, setSt] = useState<ExpertsState>(EMPTY);
  // The latest state, for the poll and the stream to build on outside React's updaters.
  const latest = useRef<ExpertsState>(EMPTY);
  const commit = (next: ExpertsState) => {
    latest.current = next;
    setSt(next);
  };
  /** True while /events streams routing steps. */
  const streaming = useRef(false);

  /** A new routing step: count its co-firing, flash it. */
  const step = (f: ExpertsFrame, seq: number, hits: Uint8Array): ExpertsFrame => {
    const cur = latest.current;
    let cofire = cur.cofire;
    if (!cofire || cofire.rows !== f.rows || cofire.cols !== f.cols) cofire = new CoFire(f.rows, f.cols);
    if (cur.frame && cur.frame.rows === f.rows && cur.frame.cols === f.cols && seq !== cur.frame.seq) cofire.add(litIndices(hits, f.rows * f.cols));
    latest.current = { ...cur, cofire };
    return { ...f, seq, hits };
  };

  const restartKey = `${base} ${epoch}`;
  usePoll(
    async (signal, n) => {
      const wantCounts = n % COUNTS_EVERY === 0;
      let frame: ExpertsFrame | null = null;
      let missing = false;
      try {
        const raw = await getFeed(wantCounts ? "experts?counts=1" : "experts", signal);
        frame = raw === null ? null : parseExperts(raw);
        missing = frame === null;
      } catch {
        /* offline */
      }
      if (signal.aborted) return "stop";
      const prev = latest.current;
      if (frame || !prev.settled || prev.frame || prev.missing !== missing) {
        let next: ExpertsFrame | null = frame;
        if (frame) {
          // With /events live the stream owns seq and hits; the poll refreshes tiers and heat.
          const same = prev.frame && prev.frame.rows === frame.rows && prev.frame.cols === frame.cols;
          next = streaming.current && same ? { ...frame, seq: prev.frame!.seq, hits: prev.frame!.hits } : step(frame, frame.seq, frame.hits);
        }
        const cur = latest.current;
        commit({
          frame: next,
          counts: frame?.counts ?? (frame ? cur.counts : null),
          tokens: frame?.tokens ?? (frame ? cur.tokens : null),
          settled: true,
          missing,
          cofire: cur.cofire,
        });
      }
      return frame ? "hit" : "miss";
    },
    { intervalMs: EXPERTS_MS, backoff: FEED_BACKOFF, restartKey },
  );

  // Routing steps as they happen, where the server streams them. A stream that
  // ends (a server restart) is opened again; a server without one is not asked twice.
  usePoll(
    async (signal) => {
      let body: ReadableStream<Uint8Array> | null;
      try {
        body = await openFeedStream("events", signal);
      } catch {
        return "miss"; // offline: polling carries on, retries slow down
      }
      if (!body) return "stop";
      try {
        for await (const ev of readSSE(body)) {
          const f = latest.current.frame;
          if (ev.event !== "routing" || !f) continue;
          const s = parseRoutingEvent(ev.data, f.rows, f.cols);
          if (!s || s.seq === f.seq) continue;
          streaming.current = true;
          const frame = step(f, s.seq, s.hits);
          commit({ ...latest.current, frame });
        }
        return "hit";
      } catch {
        return "lost";
      } finally {
        streaming.current = false;
      }
    },
    { intervalMs: EVENTS_RETRY_MS, backoff: EVENTS_BACKOFF, restartKey },
  );
  return st;
}
