import { useState } from "react";
import { useAuth } from "../../stores/auth";
import { useConnection } from "../../stores/connection";
import { useConversations } from "../../stores/conversations";
import { SETTINGS_DEFAULT, useSettings, type ThemePref } from "../../stores/settings";

export function SettingsPage() {
  const s = useSettings();
  const base = useConnection((c) => c.base);
  const status = useConnection((c) => c.status);
  const model = useConnection((c) => c.model);
  const error = useConnection((c) => c.error);
  const key = useAuth((a) => a.key);
  const setKey = useAuth((a) => a.setKey);
  const [apiDraft, setApiDraft] = useState(s.apiBase);
  const [keyDraft, setKeyDraft] = useState("");
  const convCount = useConversations((c) => c.list.length);

  return (
    <div className="page settings" data-testid="page-settings">
      <header className="page-head">
        <div>
          <h1>Settings</h1>
          <p className="muted">Saved in this browser. The API key never is.</p>
        </div>
      </header>
      <div className="settings-grid">
        <section className="card" aria-labelledby="set-look">
          <h2 id="set-look">Appearance</h2>
          <div className="segmented" role="radiogroup" aria-label="Theme" data-testid="theme-choice">
            {(["system", "light", "dark"] as ThemePref[]).map((t) => (
              <button key={t} type="button" role="radio" aria-checked={s.theme === t} className={s.theme === t ? "on" : ""} onClick={() => s.update({ theme: t })}>
                {t === "system" ? "System" : t === "light" ? "Light" : "Dark"}
              </button>
            ))}
          </div>
          <p className="small muted">Alt+T cycles the theme; Alt+1…6 switch pages.</p>
        </section>

        <section className="card" aria-labelledby="set-server">
          <h2 id="set-server">Server</h2>
          <form
            className="field"
            onSubmit={(e) => {
              e.preventDefault();
              s.update({ apiBase: apiDraft.trim() });
            }}
          >
            <label htmlFor="api-base">API base URL</label>
            <div className="row">
              <input id="api-base" className="input" placeholder={base} value={apiDraft} onChange={(e) => setApiDraft(e.target.value)} spellCheck={false} />
              <button type="submit" className="btn">
                Use
              </button>
            </div>
            <p className="small muted">
              Empty: this page's own server, or <code>http://127.0.0.1:8000/v1</code> under the Vite dev server. Any OpenAI-compatible
              endpoint works for Chat.
            </p>
          </form>
          <dl className="facts">
            <dt>Talking to</dt>
            <dd className="ellipsis" data-testid="api-base">{base}</dd>
            <dt>Status</dt>
            <dd>{status === "online" ? `connected${model ? ` · ${model}` : ""}` : status === "offline" ? "not answering" : "connecting…"}</dd>
            {error && status !== "online" ? (
              <>
                <dt>Last error</dt>
                <dd>{error}</dd>
              </>
            ) : null}
          </dl>
          <form
            className="field"
            onSubmit={(e) => {
              e.preventDefault();
              setKey(keyDraft);
              setKeyDraft("");
            }}
          >
            <label htmlFor="api-key">API key {key ? <span className="pill sure">set</span> : null}</label>
            <div className="row">
              <input id="api-key" type="password" autoComplete="off" className="input" placeholder={key ? "••••••••" : "only if the server has one"} value={keyDraft} onChange={(e) => setKeyDraft(e.target.value)} />
              <button type="submit" className="btn" disabled={!keyDraft.trim()}>
                Set
              </button>
              {key ? (
                <button type="button" className="btn ghost" onClick={() => setKey(null)}>
                  Forget
                </button>
              ) : null}
            </div>
          </form>
        </section>

        <section className="card" aria-labelledby="set-gen">
          <h2 id="set-gen">Generation</h2>
          <div className="field">
            <label htmlFor="temp">
              Temperature <span className="muted">{s.temperature.toFixed(2)}</span>
            </label>
            <input id="temp" type="range" min={0} max={2} step={0.05} value={s.temperature} onChange={(e) => s.update({ temperature: Number(e.target.value) })} />
          </div>
          <div className="field">
            <label htmlFor="maxtok">Max tokens per answer</label>
            <input id="maxtok" className="input" type="number" min={1} max={131072} value={s.maxTokens} onChange={(e) => s.update({ maxTokens: Math.max(1, Number(e.target.value) || SETTINGS_DEFAULT.maxTokens) })} />
          </div>
          <div className="field">
            <label htmlFor="sys">System prompt</label>
            <textarea id="sys" className="input" rows={3} value={s.systemPrompt} placeholder="None" onChange={(e) => s.update({ systemPrompt: e.target.value })} />
          </div>
        </section>

        <section className="card" aria-labelledby="set-data">
          <h2 id="set-data">Data</h2>
          <p className="small muted">{convCount} conversation{convCount === 1 ? "" : "s"} stored in this browser.</p>
          <div className="row">
            <button
              type="button"
              className="btn danger"
              disabled={convCount === 0}
              onClick={() => {
                if (globalThis.confirm?.("Delete every conversation stored in this browser?")) for (const c of useConversations.getState().list) useConversations.getState().remove(c.id);
              }}
            >
              Delete all conversations
            </button>
            <button type="button" className="btn" onClick={() => { s.reset(); setApiDraft(""); }}>
              Reset settings
            </button>
          </div>
        </section>
      </div>
    </div>
  );
}
