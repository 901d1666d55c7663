import { useEffect, useRef, useState } from "react";
import { Download, ImagePlus, MessageSquarePlus, PanelLeft, Send, Square, Trash2, X } from "lucide-react";
import { useConversations } from "../../stores/conversations";
import { useConnection } from "../../stores/connection";
import { useGeneration } from "../../stores/generation";
import { useSettings } from "../../stores/settings";
import { conversationToJSON, conversationToMarkdown, exportFileName } from "./exportChat";
import { fmtGB, fmtInt, fmtMs, fmtRate } from "../../lib/format";
import { Message } from "./Message";
import { useChat } from "./useChat";
import { ModelPicker, ModelStatus, useModelChoice } from "./ModelPicker";
import { Inline } from "../../components/Inline";

function download(name: string, text: string, type: string) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function readImage(f: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result));
    r.onerror = () => reject(r.error);
    r.readAsDataURL(f);
  });
}

const SUGGESTIONS = [
  "Explain mixture-of-experts routing in three sentences.",
  "Write a haiku about a hummingbird and a hard disk.",
  "Give me a Python function that streams a file in 1 MiB chunks.",
];

export function ChatPage() {
  const list = useConversations((s) => s.list);
  const activeId = useConversations((s) => s.activeId);
  const { create, select, remove } = useConversations.getState();
  const conv = list.find((c) => c.id === activeId) ?? null;
  const running = useGeneration((s) => (activeId ? s.running[activeId] : undefined));
  const health = useConnection((s) => s.health);
  const status = useConnection((s) => s.status);
  const modalities = useConnection((s) => s.modalities);
  const thinkingPref = useSettings((s) => s.thinking);
  const update = useSettings((s) => s.update);
  const { send, regenerate, continueLast, stop } = useChat();
  const choice = useModelChoice();

  const [draft, setDraft] = useState("");
  const [images, setImages] = useState<string[]>([]);
  const [slot, setSlot] = useState<number | null>(null);
  const [sideOpen, setSideOpen] = useState(false);
  const scroller = useRef<HTMLDivElement>(null);
  const input = useRef<HTMLTextAreaElement>(null);
  const fileInput = useRef<HTMLInputElement>(null);

  const kvSlots = health?.kv_slots ?? 0;
  const reasoning = health?.reasoning;
  const hasReasoning = reasoning === "optional" || reasoning === "default";
  const thinking = thinkingPref ?? reasoning === "default";
  const vision = (health?.input_modalities ?? modalities ?? []).includes("image");
  const canContinue = health?.continue_assistant !== false;
  const opts = { slot: kvSlots > 1 ? slot : null, thinking };

  // Keep the newest text in view while streaming, unless the reader scrolled up.
  const lastLen = conv?.messages[conv.messages.length - 1]?.content.length ?? 0;
  useEffect(() => {
    const el = scroller.current;
    if (!el) return;
    if (el.scrollHeight - el.scrollTop - el.clientHeight < 160) el.scrollTop = el.scrollHeight;
  }, [lastLen, conv?.messages.length, activeId]);

  useEffect(() => {
    if (slot !== null && slot >= kvSlots) setSlot(null);
  }, [kvSlots, slot]);

  // Grow the composer with its text (browsers without CSS field-sizing).
  useEffect(() => {
    const el = input.current;
    if (!el || CSS.supports?.("field-sizing", "content")) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, window.innerHeight * 0.4)}px`;
  }, [draft]);

  const submit = () => {
    const text = draft.trim();
    if (!text || running) return;
    if (!activeId) create();
    setDraft("");
    setImages([]);
    send(text, images, opts);
    input.current?.focus();
  };

  const onKey = (e: React.KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      submit();
    } else if (e.key === "Escape" && running) {
      e.preventDefault();
      stop();
    }
  };

  const live = running?.stats;
  const messages = conv?.messages ?? [];
  const lastMsg = messages[messages.length - 1];

  return (
    <div className={`chat ${sideOpen ? "side-open" : ""}`} data-testid="page-chat">
      <aside className="chat-side" aria-label="Conversations">
        <div className="side-head">
          <button
            type="button"
            className="btn primary block"
            data-testid="new-chat"
            onClick={() => {
              create();
              setSideOpen(false);
              input.current?.focus();
            }}
          >
            <MessageSquarePlus size={16} /> New chat
          </button>
          <button type="button" className="icon-btn side-close" aria-label="Close conversations" onClick={() => setSideOpen(false)}>
            <X size={16} />
          </button>
        </div>
        <ul className="conv-list" role="list">
          {list.length === 0 ? <li className="muted conv-empty">Conversations stay in this browser.</li> : null}
          {list.map((c) => (
            <li key={c.id} className={c.id === activeId ? "active" : ""}>
              <button
                type="button"
                className="conv-item"
                aria-current={c.id === activeId ? "true" : undefined}
                onClick={() => {
                  select(c.id);
                  setSideOpen(false);
                }}
              >
                <span className="conv-title">{c.title}</span>
                <span className="conv-meta">{new Date(c.updatedAt).toLocaleDateString(undefined, { month: "short", day: "numeric" })}</span>
              </button>
              <button type="button" className="icon-btn conv-del" aria-label={`Delete ${c.title}`} title="Delete" onClick={() => remove(c.id)}>
                <Trash2 size={14} />
              </button>
            </li>
          ))}
        </ul>
        <ServerCard />
      </aside>
      <div className="chat-backdrop" onClick={() => setSideOpen(false)} aria-hidden="true" />

      <section className="chat-main">
        <header className="page-head chat-head">
          <button type="button" className="icon-btn side-toggle" aria-label="Show conversations" onClick={() => setSideOpen(true)}>
            <PanelLeft size={18} />
          </button>
          <div className="chat-title">
            <h1>{conv?.title ?? "Chat"}</h1>
            <ModelPicker choice={choice} fallback={status === "offline" ? "no server" : "connecting…"} />
          </div>
          <div className="chat-tools">
            {live ? (
              <span className="live-stats" data-testid="live-stats" aria-live="polite">
                {live.ttftMs !== null ? `TTFT ${fmtMs(live.ttftMs)}` : "prefill…"}
                {live.tokPerS !== null ? ` · ${fmtRate(live.tokPerS)} tok/s` : ""}
              </span>
            ) : null}
            {kvSlots > 1 ? (
              <label className="select-wrap" title="KV slot to answer in (cache_slot)">
                <span className="small muted">Slot</span>
                <select className="select" value={slot ?? ""} onChange={(e) => setSlot(e.target.value === "" ? null : Number(e.target.value))} data-testid="slot-picker">
                  <option value="">auto</option>
                  {Array.from({ length: kvSlots }, (_, i) => (
                    <option key={i} value={i}>
                      {i}
                    </option>
                  ))}
                </select>
              </label>
            ) : null}
            {hasReasoning ? (
              <label className="switch" title="Reasoning (enable_thinking)">
                <input type="checkbox" checked={thinking} onChange={(e) => update({ thinking: e.target.checked })} data-testid="reasoning-toggle" />
                <span className="switch-track" aria-hidden="true" />
                <span className="small">Reasoning</span>
              </label>
            ) : null}
            {conv && conv.messages.length > 0 ? (
              <div className="export">
                <button type="button" className="btn ghost small" onClick={() => download(exportFileName(conv.title, "md"), conversationToMarkdown(conv), "text/markdown")} title="Export as Markdown">
                  <Download size={14} /> .md
                </button>
                <button type="button" className="btn ghost small" onClick={() => download(exportFileName(conv.title, "json"), conversationToJSON(conv), "application/json")} title="Export as JSON">
                  <Download size={14} /> .json
                </button>
              </div>
            ) : null}
          </div>
        </header>
        <ModelStatus choice={choice} />

        <div className="chat-scroll" ref={scroller}>
          {messages.length === 0 ? (
            <div className="chat-welcome" data-testid="chat-empty">
              <h2>What shall we think about?</h2>
              <p className="muted">
                <Inline
                  text={
                    status === "offline"
                      ? "No server answers yet. Start one with `coli serve`, or point Settings at any OpenAI-compatible endpoint."
                      : "Answers stream from the model on this machine. Nothing leaves it."
                  }
                />
              </p>
              <div className="suggestions">
                {SUGGESTIONS.map((s) => (
                  <button key={s} type="button" className="suggestion" onClick={() => { setDraft(s); input.current?.focus(); }}>
                    {s}
                  </button>
                ))}
              </div>
            </div>
          ) : (
            <div className="messages">
              {messages.map((m) => (
                <Message
                  key={m.id}
                  m={m}
                  streaming={running?.msgId === m.id}
                  last={m === lastMsg}
                  onRegenerate={() => regenerate(opts)}
                  onContinue={canContinue ? () => continueLast(opts) : undefined}
                />
              ))}
            </div>
          )}
        </div>

        <form
          className="composer"
          onSubmit={(e) => {
            e.preventDefault();
            submit();
          }}
        >
          {images.length ? (
            <div className="composer-images">
              {images.map((src, i) => (
                <span key={i} className="thumb">
                  <img src={src} alt={`attachment ${i + 1}`} />
                  <button type="button" aria-label="Remove image" onClick={() => setImages(images.filter((_, j) => j !== i))}>
                    <X size={12} />
                  </button>
                </span>
              ))}
            </div>
          ) : null}
          <div className="composer-row">
            {vision ? (
              <>
                <button type="button" className="icon-btn" aria-label="Attach an image" title="Attach an image" onClick={() => fileInput.current?.click()} data-testid="attach-image">
                  <ImagePlus size={18} />
                </button>
                <input
                  ref={fileInput}
                  type="file"
                  accept="image/*"
                  hidden
                  multiple
                  onChange={async (e) => {
                    const files = Array.from(e.target.files ?? []);
                    const urls = await Promise.all(files.map(readImage));
                    setImages((prev) => [...prev, ...urls]);
                    e.target.value = "";
                  }}
                />
              </>
            ) : null}
            <textarea
              ref={input}
              className="composer-input"
              rows={1}
              placeholder="Message the model…  (Enter to send, Shift+Enter for a new line)"
              aria-label="Message"
              value={draft}
              onChange={(e) => setDraft(e.target.value)}
              onKeyDown={onKey}
              data-testid="composer"
            />
            {running ? (
              <button type="button" className="btn stop" onClick={stop} aria-label="Stop (Esc)" title="Stop (Esc)" data-testid="stop">
                <Square size={14} fill="currentColor" /> Stop
              </button>
            ) : (
              <button type="submit" className="btn primary send" disabled={!draft.trim()} aria-label="Send" data-testid="send">
                <Send size={16} />
              </button>
            )}
          </div>
        </form>
      </section>
    </div>
  );
}

/** The server at a glance (docs/dashboard-feeds.md#the-dashboard-client: the chat's side panel shows scheduler, machine and tiers). */
function ServerCard() {
  const health = useConnection((s) => s.health);
  const model = useConnection((s) => s.model);
  const status = useConnection((s) => s.status);
  if (status !== "online") return null;
  const sch = health?.scheduler;
  const hw = health?.hwinfo;
  const t = health?.tiers;
  return (
    <dl className="server-card small" aria-label="Server">
      <dt>Model</dt>
      <dd className="ellipsis" title={health?.arch ? `${model} (${health.arch})` : (model ?? "")}>
        {model ?? "—"}
      </dd>
      {sch ? (
        <>
          <dt>Slots</dt>
          <dd>
            {sch.active}/{sch.capacity} busy{sch.queued ? ` · ${sch.queued} waiting` : ""}
          </dd>
        </>
      ) : null}
      {t ? (
        <>
          <dt>Experts</dt>
          <dd>
            {fmtInt(t.pinned + t.ram + t.vram)} in memory · {fmtInt(t.disk)} on disk
          </dd>
        </>
      ) : null}
      {hw ? (
        <>
          <dt>Machine</dt>
          <dd>
            {hw.cores} cores · {fmtGB(hw.ram_avail_gb)} free
          </dd>
        </>
      ) : null}
    </dl>
  );
}
