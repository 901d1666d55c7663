import { useState } from "react";
import { Boxes, CloudOff } from "lucide-react";
import { postModelAction } from "../../api/client";
import { describeError } from "../../api/errors";
import { EmptyState } from "../../components/EmptyState";
import { KeyNeeded, useKeyNeeded } from "../../components/KeyNeeded";
import { useFeed } from "../../hooks/useFeed";
import { fmtBytes } from "../../lib/format";
import { useConnection } from "../../stores/connection";
import { useChatModel } from "../chat/modelChoice";
import { LoadingBar } from "./LoadingBar";
import { fmtParams, parseModels, planLine, runsLabel, sortRows, type ModelRow } from "./models";

export const MODELS_MS = 1500;

export default function ModelsPage() {
  const { data, settled, missing } = useFeed("api/models", parseModels, MODELS_MS);
  const status = useConnection((s) => s.status);
  const keyNeeded = useKeyNeeded();
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  const act = async (id: string, action: "load" | "unload") => {
    setBusy(id);
    setError(null);
    try {
      await postModelAction(id, action);
      // Chat names the active model in every request: it names this one from now on, not the one before
      // (which would switch the server back until the next /health poll said otherwise).
      if (action === "load") {
        useConnection.getState().patch({ model: id });
        useChatModel.getState().choose(id); // and Chat's picker shows it chosen
      }
    } catch (e) {
      setError(describeError(e));
    } finally {
      setBusy(null);
    }
  };

  let main: React.ReactNode;
  if (keyNeeded && !data) main = <KeyNeeded what="the models on this machine" />;
  else if (!settled) main = <div className="page-loading" aria-busy="true" />;
  else if (!data)
    main = (
      <EmptyState icon={missing ? <Boxes size={28} /> : <CloudOff size={28} />} title={missing ? "No model library on this server" : status === "offline" ? "No server" : "Waiting for the server"} testId="models-empty">
        <p>
          colibri's <code>coli serve</code> lists its models at <code>/api/models</code>; other OpenAI-compatible servers don't.
        </p>
      </EmptyState>
    );
  else
    main = (
      <>
        {!data.library && (
          <p className="card small muted" data-testid="models-single">
            This server serves one model. Start it with <code>coli serve --models-dir DIR</code> to list every model on this machine
            (colibri's, the Hugging Face cache, LM Studio, llama.cpp and DIR) and switch between them here or by the <code>model</code> a
            request names.
          </p>
        )}
        {data.loading && <LoadingBar loading={data.loading} />}
        {(error || data.lastError) && (
          <p className="card models-error" role="alert" data-testid="models-error">
            {error ?? `${data.lastError!.model}: ${data.lastError!.message}`}
          </p>
        )}
        <ul className="models-list" role="list" data-testid="models-list">
          {sortRows(data.models).map((m) => (
            <ModelCard key={m.id} m={m} library={data.library} busy={busy !== null || data.loading !== null} loadingThis={busy === m.id || data.loading?.model === m.id} onAct={act} />
          ))}
        </ul>
      </>
    );

  return (
    <div className="page models" data-testid="page-models">
      <header className="page-head">
        <div>
          <h1>Models</h1>
          <p className="muted">The models on this machine: whether this colibri runs each, and how it would sit in memory before it loads.</p>
        </div>
      </header>
      {main}
    </div>
  );
}

function ModelCard({ m, library, busy, loadingThis, onAct }: { m: ModelRow; library: boolean; busy: boolean; loadingThis: boolean; onAct: (id: string, a: "load" | "unload") => void }) {
  const runs = runsLabel(m);
  return (
    <li className="card model-card" data-testid={`model-${m.id}`} data-state={m.state}>
      <div className="card-head">
        <div className="model-title">
          <strong>{m.id}</strong>
          <span className={`pill model-state model-${m.state}`}>{m.state}</span>
          <span className={`pill model-runs runs-${runs.replace(" ", "-")}`} title={m.reason}>
            {runs}
          </span>
        </div>
        {library && (
          <div className="row">
            {m.state !== "active" && m.runnable !== false && (
              <button type="button" className="btn small primary" disabled={busy} onClick={() => onAct(m.id, "load")} data-testid={`load-${m.id}`}>
                {loadingThis ? "Loading…" : "Load"}
              </button>
            )}
            {m.state === "loaded" && (
              <button type="button" className="btn small ghost" disabled={busy} onClick={() => onAct(m.id, "unload")} data-testid={`unload-${m.id}`}>
                Unload
              </button>
            )}
          </div>
        )}
      </div>
      <dl className="model-facts">
        <div>
          <dt>Architecture</dt>
          <dd>{m.arch ?? "—"}</dd>
        </div>
        <div>
          <dt>Parameters</dt>
          <dd>{fmtParams(m.nParams)}</dd>
        </div>
        <div>
          <dt>Size</dt>
          <dd>{m.size ? fmtBytes(m.size) : "—"}</dd>
        </div>
        <div>
          <dt>Types</dt>
          <dd>{m.quantTypes.slice(0, 4).join(" ") || "—"}</dd>
        </div>
        <div>
          <dt>Context</dt>
          <dd>{m.ctxTrain ? m.ctxTrain.toLocaleString("en-US") : "—"}</dd>
        </div>
        <div>
          <dt>Plan</dt>
          <dd title={m.plan?.reason}>{planLine(m.plan, fmtBytes)}</dd>
        </div>
      </dl>
      {m.runnable === false && <p className="small models-why">{m.reason}</p>}
      {m.path && (
        <p className="small muted model-path" title={m.path}>
          {m.source ? `${m.source} · ` : ""}
          {m.path}
        </p>
      )}
    </li>
  );
}
