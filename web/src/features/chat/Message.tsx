import { memo, useMemo } from "react";
import { AlertCircle, Brain as BrainIcon, Copy, FastForward, RotateCcw } from "lucide-react";
import { renderMarkdown } from "./markdown";
import type { ChatMessage } from "../../stores/conversations";
import { fmtMs, fmtRate } from "../../lib/format";
import { Inline } from "../../components/Inline";

/** Copies a code block when its Copy button is pressed (one listener per message). */
function onCodeCopy(e: React.MouseEvent<HTMLDivElement>) {
  const btn = (e.target as HTMLElement).closest<HTMLButtonElement>(".code-copy");
  const code = btn?.parentElement?.querySelector("code");
  if (!btn || !code) return;
  void navigator.clipboard?.writeText(code.textContent ?? "").then(() => {
    btn.textContent = "Copied";
    setTimeout(() => (btn.textContent = "Copy"), 1200);
  });
}

const Markdown = memo(function Markdown({ text }: { text: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div className="md" onClick={onCodeCopy} dangerouslySetInnerHTML={{ __html: html }} />;
});

export interface MessageProps {
  m: ChatMessage;
  streaming: boolean;
  last: boolean;
  onRegenerate?: () => void;
  onContinue?: () => void;
}

export function Message({ m, streaming, last, onRegenerate, onContinue }: MessageProps) {
  if (m.role === "user") {
    return (
      <div className="msg msg-user" data-testid="msg-user">
        {m.images?.length ? (
          <div className="msg-images">
            {m.images.map((src, i) => (
              <img key={i} src={src} alt={`attachment ${i + 1}`} />
            ))}
          </div>
        ) : null}
        <div className="bubble">{m.content}</div>
      </div>
    );
  }
  const waiting = streaming && !m.content && !m.reasoning;
  return (
    <article className="msg msg-assistant" data-testid="msg-assistant" aria-busy={streaming}>
      {m.reasoning ? (
        <details className="reasoning" open={streaming && !m.content}>
          <summary>
            <BrainIcon size={14} /> Reasoning{streaming && !m.content ? "…" : ""}
          </summary>
          <div className="reasoning-body">{m.reasoning}</div>
        </details>
      ) : null}
      {waiting ? (
        <div className="typing" aria-label="Waiting for the first token">
          <span />
          <span />
          <span />
        </div>
      ) : (
        <Markdown text={m.content} />
      )}
      {m.error ? (
        <div className="msg-error" role="alert">
          <AlertCircle size={15} /> <span><Inline text={m.error} /></span>
        </div>
      ) : null}
      <footer className="msg-foot">
        {m.stats && (m.stats.ttftMs !== null || m.stats.tokens > 0) ? (
          <span className="msg-stats">
            {m.stats.ttftMs !== null ? `TTFT ${fmtMs(m.stats.ttftMs)}` : ""}
            {m.stats.tokPerS !== null ? ` · ${fmtRate(m.stats.tokPerS)} tok/s` : ""}
            {m.stats.tokens ? ` · ${m.stats.tokens} tok` : ""}
            {m.stats.finish === "length" ? " · cut at the token limit" : m.stats.finish === "stopped" ? " · stopped" : ""}
          </span>
        ) : null}
        {!streaming && m.content ? (
          <span className="msg-actions">
            <button type="button" className="icon-btn" title="Copy" aria-label="Copy answer" onClick={() => void navigator.clipboard?.writeText(m.content)}>
              <Copy size={14} />
            </button>
            {last && onRegenerate ? (
              <button type="button" className="icon-btn" title="Regenerate" aria-label="Regenerate" onClick={onRegenerate}>
                <RotateCcw size={14} />
              </button>
            ) : null}
            {last && onContinue ? (
              <button type="button" className="icon-btn" title="Continue" aria-label="Continue this answer" onClick={onContinue}>
                <FastForward size={14} />
              </button>
            ) : null}
          </span>
        ) : null}
      </footer>
    </article>
  );
}
