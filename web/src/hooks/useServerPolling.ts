// Polls {root}/health every 5 s (notes §5) and asks /v1/models for the model
// id when it is not known yet. A server that does not answer is polled less
// often (5 → 10 → 20 → 30 s) so an offline page stays quiet.
import { useEffect } from "react";
import { getFeed, getModels } from "../api/client";
import { parseHealth } from "../api/feeds";
import { ApiError, describeError } from "../api/errors";
import { useAuth } from "../stores/auth";
import { useConnection } from "../stores/connection";

export const HEALTH_MS = 5000;

export function useServerPolling(): void {
  const base = useConnection((s) => s.base);
  const epoch = useAuth((s) => s.epoch);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | null = null;
    let failures = 0;
    const ctl = new AbortController();
    const { patch } = useConnection.getState();
    patch({ model: null });

    const tick = async () => {
      let reachable = false;
      let health = null;
      try {
        health = parseHealth(await getFeed("health", ctl.signal));
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
          const list = await getModels(ctl.signal);
          reachable = true;
          model = health?.model ?? list.data[0]?.id ?? model;
          modalities = list.data[0]?.input_modalities ?? modalities;
        } catch (e) {
          if (e instanceof ApiError && e.status !== 0) reachable = true;
          if (!(e instanceof DOMException)) error = describeError(e);
        }
      }
      if (stopped) return;
      failures = reachable ? 0 : failures + 1;
      patch({
        status: reachable ? "online" : "offline",
        health,
        model: model ?? null,
        modalities,
        error: error ?? (reachable ? null : "The server did not answer."),
      });
      const wait = failures === 0 ? HEALTH_MS : Math.min(30000, HEALTH_MS * 2 ** Math.min(failures - 1, 3));
      timer = setTimeout(tick, wait);
    };
    void tick();
    return () => {
      stopped = true;
      ctl.abort();
      if (timer) clearTimeout(timer);
    };
  }, [base, epoch]);
}
