import { KeyRound } from "lucide-react";
import { useEffect, useRef, useState } from "react";
import { useAuth } from "../stores/auth";

/** Asks for the API key after a 401. The key stays in memory (this tab) only. */
export function KeyDialog() {
  const needKey = useAuth((s) => s.needKey);
  const message = useAuth((s) => s.message);
  const setKey = useAuth((s) => s.setKey);
  const dismiss = useAuth((s) => s.dismiss);
  const [value, setValue] = useState("");
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (needKey && !d.open) d.showModal?.();
    if (!needKey && d.open) d.close();
  }, [needKey]);
  return (
    <dialog ref={ref} className="dialog" aria-labelledby="key-title" onCancel={dismiss} data-testid="key-dialog">
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          setKey(value);
          setValue("");
        }}
      >
        <div className="dialog-icon">
          <KeyRound size={22} />
        </div>
        <h2 id="key-title">This server needs an API key</h2>
        <p className="muted">
          {message ? `${message.replace(/\.$/, "")}. ` : ""}Enter the key the server was started with (its <code>COLI_API_KEY</code>
          or <code>--api-key</code>). It stays in this tab's memory only and is sent as a Bearer token.
        </p>
        <input
          type="password"
          autoFocus
          autoComplete="off"
          className="input"
          placeholder="API key"
          aria-label="API key"
          value={value}
          onChange={(e) => setValue(e.target.value)}
        />
        <div className="dialog-actions">
          <button type="button" className="btn ghost" onClick={dismiss}>
            Not now
          </button>
          <button type="submit" className="btn primary" disabled={!value.trim()}>
            Use key
          </button>
        </div>
      </form>
    </dialog>
  );
}
