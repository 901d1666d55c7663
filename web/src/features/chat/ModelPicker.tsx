// Chat's model picker (logic in modelChoice.ts): the models this server can answer with, which is
// loaded, and the load in progress with its bar. Picking a model that is only on disk loads it now;
// every request names the picked model either way (colibri loads the one a request names).
import { useEffect, useMemo, useState } from "react";
import { getModels, postModelAction } from "../../api/client";
import { describeError } from "../../api/errors";
import { useFeed } from "../../hooks/useFeed";
import { usePoll } from "../../hooks/usePoll";
import { useConnection } from "../../stores/connection";
import { LoadingBar } from "../models/LoadingBar";
import { parseModels, type ModelsFeed } from "../models/models";
import { effectiveModel, modelOptions, needsLoad, stateLabel, useChatModel, type ModelOption } from "./modelChoice";

/** /api/models plans every model it lists: asked every 5 s, every second while a load runs. */
const MODELS_MS = 5000;
const LOADING_MS = 1000;
const LIST_MS = 15_000;

export interface ModelChoice {
  options: ModelOption[];
  model: string | null;
  /** The user's pick (kept when this server lacks it). */
  chosen: string | null;
  feed: ModelsFeed | null;
  error: string | null;
  pick: (id: string) => void;
}

/** The picker's state, polled while Chat is open: /api/models on colibri, /v1/models elsewhere. */
export function useModelChoice(): ModelChoice {
  const base = useConnection((s) => s.base);
  const serverModel = useConnection((s) => s.model);
  const [fast, setFast] = useState(false);
  const { data: feed, settled, missing } = useFeed("api/models", parseModels, fast ? LOADING_MS : MODELS_MS);
  const loadingNow = feed?.loading != null;
  useEffect(() => setFast(loadingNow), [loadingNow]);
  const [listed, setListed] = useState<string[]>([]);
  usePoll(
    async (signal) => {
      try {
        const list = await getModels(signal);
        if (signal.aborted) return "stop";
        setListed(list.data.map((m) => m.id));
        return "hit";
      } catch {
        return "miss";
      }
    },
    { intervalMs: LIST_MS, backoff: { maxMs: 60_000 }, enabled: settled && missing, restartKey: base },
  );
  const chosen = useChatModel((s) => s.chosen);
  const options = useMemo(() => modelOptions(feed ? [] : listed, feed), [feed, listed]);
  useEffect(() => useChatModel.getState().setOptions(options), [options]);
  const [error, setError] = useState<string | null>(null);
  const pick = (id: string) => {
    useChatModel.getState().choose(id);
    setError(null);
    if (!needsLoad(options.find((o) => o.id === id))) return;
    setFast(true); // show the load's bar from its start
    postModelAction(id, "load").then(
      () => useConnection.getState().patch({ model: id }),
      (e: unknown) => setError(describeError(e)),
    );
  };
  return { options, model: effectiveModel(chosen, options, serverModel), chosen, feed, error, pick };
}

/** The header's picker: a select when there is a choice, the model's name otherwise. */
export function ModelPicker({ choice, fallback }: { choice: ModelChoice; fallback: string }) {
  const { options, model, pick } = choice;
  const current = options.find((o) => o.id === model);
  if (options.length < 2)
    return (
      <span className="muted small" data-testid="chat-model">
        {model ?? fallback}
      </span>
    );
  return (
    <label className="chat-model-pick small">
      <select className="select" aria-label="Model" value={model ?? ""} onChange={(e) => pick(e.target.value)} data-testid="model-picker" title={current ? `${current.id} (${stateLabel(current)})` : undefined}>
        {options.map((o) => (
          <option key={o.id} value={o.id}>
            {o.state ? `${o.id} · ${stateLabel(o)}` : o.id}
          </option>
        ))}
      </select>
      <span className={`pill model-state model-${current?.state ?? "available"}`} data-testid="chat-model">
        {current ? stateLabel(current) || "listed" : "—"}
      </span>
    </label>
  );
}

/** Under the header: the load in progress, or why the picked model did not load. */
export function ModelStatus({ choice }: { choice: ModelChoice }) {
  const loading = choice.feed?.loading ?? null;
  // the server's last failed load, while the pick is that model and it is not offered any more
  const last = choice.feed?.lastError;
  const failed = choice.error ?? (last && last.model === choice.chosen && choice.model !== choice.chosen ? `${last.model}: ${last.message}` : null);
  if (loading) return <LoadingBar loading={loading} className="chat-loading" testId="chat-model-loading" />;
  if (failed)
    return (
      <p className="card models-error chat-loading" role="alert" data-testid="chat-model-error">
        {failed}
      </p>
    );
  return null;
}
