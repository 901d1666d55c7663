// Stream assembly: turns OpenAI chat.completion.chunk events into one reply
// (content, reasoning, finish reason, usage) and its timing. Pure.

import type { ChatChunk, Usage } from "../api/types";

export interface StreamState {
  content: string;
  reasoning: string;
  finish: string | null;
  usage: Usage | null;
  /** Chunks that carried text (≈ tokens until `usage` arrives). */
  pieces: number;
  startedAt: number;
  firstAt: number | null;
  lastAt: number | null;
}

export function startStream(now: number, content = "", reasoning = ""): StreamState {
  return { content, reasoning, finish: null, usage: null, pieces: 0, startedAt: now, firstAt: null, lastAt: null };
}

/** Parses one SSE `data:` payload: a chunk, "done" for [DONE], or null for anything unreadable. */
export function parseChunk(data: string): ChatChunk | "done" | null {
  const d = data.trim();
  if (d === "[DONE]") return "done";
  try {
    const v = JSON.parse(d) as unknown;
    if (!v || typeof v !== "object") return null;
    const c = v as Partial<ChatChunk>;
    if (c.choices !== undefined && !Array.isArray(c.choices)) return null;
    return { ...c, choices: c.choices ?? [] } as ChatChunk;
  } catch {
    return null;
  }
}

/** The message of an error event a server sends once its reply has begun (`data: {"error": {...}}`:
 * docs/streaming.md#failures-mid-stream), with its code; null for any other payload. */
export function streamError(data: string): string | null {
  try {
    const v = JSON.parse(data.trim()) as { error?: unknown };
    if (!v || typeof v !== "object" || !v.error || typeof v.error !== "object") return null;
    const err = v.error as { message?: unknown; code?: unknown };
    const message = typeof err.message === "string" && err.message ? err.message : "the server failed mid-reply";
    return typeof err.code === "string" && err.code ? `${message} (${err.code})` : message;
  } catch {
    return null;
  }
}

export function applyChunk(s: StreamState, chunk: ChatChunk, now: number): StreamState {
  let { content, reasoning, finish, pieces, firstAt, lastAt } = s;
  for (const ch of chunk.choices) {
    if (ch.index !== 0 && ch.index !== undefined) continue;
    const dc = ch.delta?.content;
    const dr = ch.delta?.reasoning_content;
    const text = (typeof dc === "string" ? dc : "") + (typeof dr === "string" ? dr : "");
    if (typeof dc === "string") content += dc;
    if (typeof dr === "string") reasoning += dr;
    if (text.length > 0) {
      pieces += 1;
      if (firstAt === null) firstAt = now;
      lastAt = now;
    }
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  const usage = chunk.usage ?? s.usage;
  return { ...s, content, reasoning, finish, usage, pieces, firstAt, lastAt };
}

export interface StreamStats {
  /** Time to first token, ms; null before it. */
  ttftMs: number | null;
  /** Decode speed after the first token, tokens/s; null until two tokens. */
  tokPerS: number | null;
  /** Tokens generated: the server's count when known, else the text chunks seen. */
  tokens: number;
  exact: boolean;
}

export function streamStats(s: StreamState, now: number): StreamStats {
  const tokens = s.usage?.completion_tokens ?? s.pieces;
  const ttftMs = s.firstAt === null ? null : s.firstAt - s.startedAt;
  let tokPerS: number | null = null;
  if (s.firstAt !== null) {
    const end = s.finish !== null || s.usage ? (s.lastAt ?? now) : now;
    const secs = (end - s.firstAt) / 1000;
    if (tokens > 1 && secs > 0) tokPerS = (tokens - 1) / secs;
  }
  return { ttftMs, tokPerS, tokens, exact: s.usage !== null };
}
