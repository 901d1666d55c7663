// Polls {root}/health every 5 s (docs/dashboard-feeds.md#the-dashboard-client) and asks /v1/models for the model
// id when it is not known yet. A server that does not answer is polled less
// often (5 → 10 → 20 → 30 s) so an offline page stays quiet.
import { useEffect } from "react";
import { getFeed, getModels } from "../api/client";
import { parseHealth } from "../api/feeds";
import { ApiError, describeError } from "../api/errors";
import type { Backoff } from "../lib/poll";
import { useAuth } from "../stores/auth";
import { useConnection } from "../stores/connection";
import { usePoll } from "./usePoll";

export const HEALTH_MS = 5000;
/** The first miss is retried after 5 s, then 10, 20 and 30 s. */
const HEALTH_BACKOFF: Backoff = { maxMs: 30_000, graceMisses: 1 };

export function useServerPolling(): void {
  const base = useConnection((s) => s.base);
  const epoch = useAuth((s) => s.epoch);
  // A new server (or key): its model is not known yet.
  useEffect(() => {
    useConnection.getState().patch({ model: null });
  }, [base, epoch]);
  usePoll(
    async (signal) => {
      let reachable = false;
      let health = null;
      try {
        health = parseHealth(await getFeed("health", signal));
        reachable = health !== null;
      } catch {
        /* network: maybe the server has no /health but answers /v1 */
      }
      const known = useConnection.getState().model;
      let model = health?.model ?? known;
      let modalities = useConnection.getState().modalities;
      let error: string | null = null;
      if (!known || !reachable) {
        try {
          const list = await getModels(signal);
          reachable = true;
          model = health?.model ?? list.data[0]?.id ?? model;
          modalities = list.data[0]?.input_modalities ?? modalities;
        } catch (e) {
          if (e instanceof ApiError && e.status !== 0) reachable = true;
          if (!(e instanceof DOMException)) error = describeError(e);
        }
      }
      if (signal.aborted) return "stop";
      useConnection.getState().patch({
        status: reachable ? "online" : "offline",
        health,
        model: model ?? null,
        modalities,
        error: error ?? (reachable ? null : "The server did not answer."),
      });
      return reachable ? "hit" : "miss";
    },
    { intervalMs: HEALTH_MS, backoff: HEALTH_BACKOFF, restartKey: `${base} ${epoch}` },
  );
}
