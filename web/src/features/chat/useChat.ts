// Sending, stopping, regenerating and continuing: the chat's one piece of
// logic, kept out of the components.
import { useCallback } from "react";
import { streamChat } from "../../api/client";
import { describeError, isAbort } from "../../api/errors";
import type { ChatContentPart, ChatMessageIn, ChatRequest } from "../../api/types";
import { applyChunk, parseChunk, startStream, streamError, streamStats } from "../../lib/chatStream";
import { newId } from "../../lib/storage";
import { useConnection } from "../../stores/connection";
import { useConversations, type ChatMessage } from "../../stores/conversations";
import { useGeneration } from "../../stores/generation";
import { useSettings } from "../../stores/settings";
import { effectiveModel, useChatModel } from "./modelChoice";

export interface ChatOptions {
  /** KV slot to answer in; null = the server chooses. */
  slot: number | null;
  thinking: boolean;
}

function toWire(m: ChatMessage): ChatMessageIn {
  if (m.images?.length && m.role === "user") {
    const parts: ChatContentPart[] = [{ type: "text", text: m.content }, ...m.images.map((url) => ({ type: "image_url" as const, image_url: { url } }))];
    return { role: m.role, content: parts };
  }
  return { role: m.role, content: m.content };
}

/** The request body for a conversation (pure; exported for tests). */
export function buildRequest(
  model: string,
  history: ChatMessage[],
  o: { systemPrompt: string; temperature: number; maxTokens: number; slot: number | null; thinking: boolean | null },
): ChatRequest {
  const messages: ChatMessageIn[] = [];
  if (o.systemPrompt.trim()) messages.push({ role: "system", content: o.systemPrompt.trim() });
  for (const m of history) if (!m.error || m.content) messages.push(toWire(m));
  const req: ChatRequest = {
    model,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: o.temperature,
    max_completion_tokens: o.maxTokens,
  };
  if (o.thinking !== null) req.enable_thinking = o.thinking;
  if (o.slot !== null) req.cache_slot = o.slot;
  return req;
}

const activeId = () => useConversations.getState().activeId;

/** Chat actions on the active conversation (read when called, so a conversation created just before works). */
export function useChat() {
  const run = useCallback(
    async (convId: string, history: ChatMessage[], target: ChatMessage, opts: ChatOptions) => {
      const conv = useConversations.getState();
      const { model: serverModel, health } = useConnection.getState();
      const { chosen, options } = useChatModel.getState();
      const model = effectiveModel(chosen, options, serverModel);
      const s = useSettings.getState();
      const hasReasoning = health?.reasoning === "optional" || health?.reasoning === "default";
      const continuing = history[history.length - 1]?.id === target.id;
      const all = continuing ? history : [...history, target];
      conv.setMessages(convId, all, model ?? undefined);
      if (!model) {
        conv.patchMessage(convId, target.id, {
          error: useConnection.getState().status === "offline" ? "No server answers: start `coli serve`, or set the API base URL in Settings." : "No model: the server has not said which model it serves (GET /v1/models).",
        });
        conv.flush();
        return;
      }
      const ctl = new AbortController();
      const gen = useGeneration.getState();
      gen.start(convId, target.id, ctl);
      const req = buildRequest(model, history, {
        systemPrompt: s.systemPrompt,
        temperature: s.temperature,
        maxTokens: s.maxTokens,
        slot: opts.slot,
        thinking: hasReasoning ? opts.thinking : null,
      });
      let st = startStream(performance.now(), target.content, target.reasoning ?? "");
      let lastFlush = 0;
      const flush = (force = false) => {
        const now = performance.now();
        if (!force && now - lastFlush < 60) return;
        lastFlush = now;
        const stats = streamStats(st, now);
        useConversations.getState().patchMessage(convId, target.id, {
          content: st.content,
          reasoning: st.reasoning || undefined,
          stats: { ttftMs: stats.ttftMs, tokPerS: stats.tokPerS, tokens: stats.tokens, finish: st.finish },
        });
        useGeneration.getState().progress(convId, stats);
      };
      try {
        for await (const data of streamChat(req, ctl.signal)) {
          const failed = streamError(data); // the reply broke off: what came stays, the error is shown under it
          if (failed) throw new Error(`The reply broke off: ${failed}`);
          const chunk = parseChunk(data);
          if (chunk === "done") break;
          if (chunk) st = applyChunk(st, chunk, performance.now());
          flush();
        }
        flush(true);
      } catch (e) {
        flush(true);
        if (isAbort(e)) {
          useConversations.getState().patchMessage(convId, target.id, { stats: { ...streamStats(st, performance.now()), finish: "stopped" } });
        } else {
          useConversations.getState().patchMessage(convId, target.id, { error: describeError(e) });
        }
      } finally {
        useGeneration.getState().finish(convId);
        useConversations.getState().flush();
      }
    },
    [],
  );

  const send = useCallback(
    (text: string, images: string[], opts: ChatOptions) => {
      const convId = activeId();
      if (!convId) return;
      const c = useConversations.getState().list.find((x) => x.id === convId);
      const user: ChatMessage = { id: newId(), role: "user", content: text, ...(images.length ? { images } : {}) };
      const reply: ChatMessage = { id: newId(), role: "assistant", content: "" };
      void run(convId, [...(c?.messages ?? []).filter((m) => !(m.role === "assistant" && !m.content && m.error)), user], reply, opts);
    },
    [run],
  );

  /** Answers the last user turn again, replacing the last answer. */
  const regenerate = useCallback(
    (opts: ChatOptions) => {
      const convId = activeId();
      const c = useConversations.getState().list.find((x) => x.id === convId);
      if (!convId || !c) return;
      let end = c.messages.length;
      while (end > 0 && c.messages[end - 1].role === "assistant") end--;
      if (end === 0) return;
      void run(convId, c.messages.slice(0, end), { id: newId(), role: "assistant", content: "" }, opts);
    },
    [run],
  );

  /** Continues the last answer in place (the server continues a trailing assistant turn). */
  const continueLast = useCallback(
    (opts: ChatOptions) => {
      const convId = activeId();
      const c = useConversations.getState().list.find((x) => x.id === convId);
      const last = c?.messages[c.messages.length - 1];
      if (!convId || !c || !last || last.role !== "assistant" || !last.content) return;
      const trimmed = { ...last, content: last.content.replace(/\s+$/, ""), error: undefined };
      void run(convId, [...c.messages.slice(0, -1), trimmed], trimmed, opts);
    },
    [run],
  );

  const stop = useCallback(() => {
    const convId = activeId();
    if (convId) useGeneration.getState().stop(convId);
  }, []);

  return { send, regenerate, continueLast, stop };
}
