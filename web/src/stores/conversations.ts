// Conversations, kept in this browser (localStorage). Streaming updates the
// store on every chunk; saving is throttled so a long answer does not
// serialise the whole history per token.
import { create } from "zustand";
import { newId } from "../lib/storage";

export interface MessageStats {
  ttftMs: number | null;
  tokPerS: number | null;
  tokens: number;
  finish: string | null;
}

export interface ChatMessage {
  id: string;
  role: "user" | "assistant" | "system";
  content: string;
  reasoning?: string;
  /** data: URLs of attached images (user turns, vision models only). */
  images?: string[];
  stats?: MessageStats;
  error?: string;
}

export interface Conversation {
  id: string;
  title: string;
  createdAt: number;
  updatedAt: number;
  model?: string;
  messages: ChatMessage[];
}

const KEY = "colibri.conversations";
const ACTIVE_KEY = "colibri.activeConversation";

function load(): Conversation[] {
  try {
    const raw = globalThis.localStorage?.getItem(KEY);
    const v = raw ? (JSON.parse(raw) as unknown) : [];
    if (!Array.isArray(v)) return [];
    return v.filter((c): c is Conversation => !!c && typeof c === "object" && typeof c.id === "string" && Array.isArray(c.messages));
  } catch {
    return [];
  }
}

let saveTimer: ReturnType<typeof setTimeout> | null = null;
let pending: Conversation[] | null = null;
/** Writes a throttled save now, if one is waiting. */
function flushPending() {
  if (saveTimer && pending) save(pending, true);
}
function save(list: Conversation[], now = false) {
  pending = list;
  const write = () => {
    saveTimer = null;
    pending = null;
    try {
      globalThis.localStorage?.setItem(KEY, JSON.stringify(list));
    } catch {
      // Quota: keep the text, drop attached images from storage.
      try {
        const slim = list.map((c) => ({ ...c, messages: c.messages.map(({ images: _images, ...m }) => m) }));
        globalThis.localStorage?.setItem(KEY, JSON.stringify(slim));
      } catch {
        /* storage unavailable: the session still works */
      }
    }
  };
  if (saveTimer) clearTimeout(saveTimer);
  if (now) write();
  else saveTimer = setTimeout(write, 400);
}

export function titleFrom(text: string): string {
  const t = text.replace(/\s+/g, " ").trim();
  return t.length > 48 ? `${t.slice(0, 47)}…` : t || "New conversation";
}

interface ConversationsState {
  list: Conversation[];
  activeId: string | null;
  create: () => string;
  select: (id: string | null) => void;
  remove: (id: string) => void;
  rename: (id: string, title: string) => void;
  setMessages: (id: string, messages: ChatMessage[], model?: string) => void;
  patchMessage: (id: string, msgId: string, patch: Partial<ChatMessage>) => void;
  flush: () => void;
}

export const useConversations = create<ConversationsState>((set, get) => {
  const list = load();
  const saved = globalThis.localStorage?.getItem(ACTIVE_KEY) ?? null;
  const commit = (l: Conversation[], now = false) => {
    set({ list: l });
    save(l, now);
  };
  return {
    list,
    activeId: list.some((c) => c.id === saved) ? saved : (list[0]?.id ?? null),
    create: () => {
      const now = Date.now();
      const c: Conversation = { id: newId(), title: "New conversation", createdAt: now, updatedAt: now, messages: [] };
      commit([c, ...get().list], true);
      get().select(c.id);
      return c.id;
    },
    select: (id) => {
      set({ activeId: id });
      try {
        if (id) globalThis.localStorage?.setItem(ACTIVE_KEY, id);
        else globalThis.localStorage?.removeItem(ACTIVE_KEY);
      } catch {
        /* ignore */
      }
    },
    remove: (id) => {
      const l = get().list.filter((c) => c.id !== id);
      commit(l, true);
      if (get().activeId === id) get().select(l[0]?.id ?? null);
    },
    rename: (id, title) => commit(get().list.map((c) => (c.id === id ? { ...c, title: title.trim() || c.title } : c)), true),
    setMessages: (id, messages, model) =>
      commit(
        get().list.map((c) => {
          if (c.id !== id) return c;
          const firstUser = messages.find((m) => m.role === "user");
          const title = c.title === "New conversation" && firstUser ? titleFrom(firstUser.content) : c.title;
          return { ...c, messages, title, model: model ?? c.model, updatedAt: Date.now() };
        }),
      ),
    patchMessage: (id, msgId, patch) =>
      commit(
        get().list.map((c) =>
          c.id !== id ? c : { ...c, updatedAt: Date.now(), messages: c.messages.map((m) => (m.id === msgId ? { ...m, ...patch } : m)) },
        ),
      ),
    flush: () => flushPending(),
  };
});

// A tab closed within the save throttle still keeps its last words.
globalThis.addEventListener?.("pagehide", flushPending);
// Another tab changed the conversations: take its list (this tab saves only what it changes).
globalThis.addEventListener?.("storage", (e: StorageEvent) => {
  if (e.key === KEY) useConversations.setState({ list: load() });
});
