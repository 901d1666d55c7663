import { Loader2 } from "lucide-react";
import { fmtBytes, fmtPct } from "../../lib/format";
import { loadFraction, type Loading } from "./models";

/** The load in progress, with how far it is (the Models page; Chat shows it under its header). */
export function LoadingBar({ loading, className = "", testId = "models-loading" }: { loading: Loading; className?: string; testId?: string }) {
  const f = loadFraction(loading);
  return (
    <div className={`card models-loading ${className}`} role="status" data-testid={testId}>
      <div className="card-head">
        <span>
          <Loader2 size={16} className="spin" aria-hidden /> Loading <strong>{loading.model}</strong>: {loading.phase}
        </span>
        <span className="muted small">{f === null ? "" : `${fmtBytes(loading.bytesDone)} of ${fmtBytes(loading.bytesTotal)} · ${fmtPct(f)}`}</span>
      </div>
      <div className="models-bar" aria-hidden>
        <div className="models-bar-fill" style={{ width: `${Math.round((f ?? 0) * 100)}%` }} />
      </div>
    </div>
  );
}
