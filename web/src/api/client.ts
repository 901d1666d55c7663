// HTTP to the server: the API key (memory only) as a Bearer token, the
// server's error envelope as ApiError, 401 raising the key prompt, and quiet
// feed reads that turn "this server has no such feed" into null.

import { ApiError, errorFromResponse } from "./errors";
import { joinUrl, feedRoot } from "./connection";
import { useAuth } from "../stores/auth";
import { useConnection } from "../stores/connection";
import { readSSE } from "./sse";
import type { ChatRequest, ModelsList, SystemOneReply, SystemOneRequest } from "./types";

function headers(json: boolean): HeadersInit {
  const h: Record<string, string> = {};
  if (json) h["Content-Type"] = "application/json";
  const key = useAuth.getState().key;
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function checked(res: Response): Promise<Response> {
  if (res.ok) return res;
  const err = await errorFromResponse(res);
  if (res.status === 401) useAuth.getState().requireKey(err.message);
  throw err;
}

const base = () => useConnection.getState().base;

export async function getModels(signal?: AbortSignal): Promise<ModelsList> {
  const url = joinUrl(base(), "models");
  const res = await checked(await fetch(url, { headers: headers(false), signal }));
  let body: ModelsList | null = null;
  if ((res.headers.get("content-type") ?? "").includes("json")) body = (await res.json().catch(() => null)) as ModelsList | null;
  // Status 0: something answered, but not an OpenAI-compatible API (an HTML page, say).
  if (!body || !Array.isArray(body.data)) throw new ApiError(0, `${url} is not an OpenAI-compatible API.`);
  return body;
}

/**
 * GET {root}/<path> as JSON; null when the server lacks the feed (404, not
 * JSON, an HTML fallback page). Network failures throw (the caller backs off).
 */
export async function getFeed(path: string, signal?: AbortSignal): Promise<unknown | null> {
  const res = await fetch(joinUrl(feedRoot(base()), path), { headers: headers(false), signal });
  if (!res.ok) return null;
  const type = res.headers.get("content-type") ?? "";
  if (!type.includes("json")) return null;
  try {
    return (await res.json()) as unknown;
  } catch {
    return null;
  }
}

/** Opens GET {root}/<path> as an SSE stream; null when the server has no such stream. */
export async function openFeedStream(path: string, signal: AbortSignal): Promise<ReadableStream<Uint8Array> | null> {
  const res = await fetch(joinUrl(feedRoot(base()), path), { headers: { ...headers(false), Accept: "text/event-stream" }, signal });
  if (!res.ok || !res.body || !(res.headers.get("content-type") ?? "").includes("text/event-stream")) {
    await res.body?.cancel().catch(() => undefined);
    return null;
  }
  return res.body;
}

/** Streams a chat completion: yields each SSE data payload. Abort with the signal. */
export async function* streamChat(req: ChatRequest, signal: AbortSignal): AsyncGenerator<string> {
  const res = await checked(
    await fetch(joinUrl(base(), "chat/completions"), { method: "POST", headers: headers(true), body: JSON.stringify(req), signal }),
  );
  if (!res.body) throw new ApiError(res.status, "The server sent no stream.");
  const type = res.headers.get("content-type") ?? "";
  if (!type.includes("text/event-stream")) {
    // A server that ignored stream: true — read the whole reply as one chunk.
    const body = (await res.json()) as { choices?: { message?: { content?: string; reasoning_content?: string }; finish_reason?: string }[]; usage?: unknown };
    const m = body.choices?.[0]?.message;
    yield JSON.stringify({ choices: [{ index: 0, delta: { content: m?.content ?? "", reasoning_content: m?.reasoning_content }, finish_reason: body.choices?.[0]?.finish_reason ?? "stop" }], usage: body.usage ?? null });
    return;
  }
  for await (const ev of readSSE(res.body)) yield ev.data;
}

export async function postSystemOne(req: SystemOneRequest, signal?: AbortSignal): Promise<SystemOneReply> {
  const res = await checked(
    await fetch(joinUrl(base(), "systemone"), { method: "POST", headers: headers(true), body: JSON.stringify(req), signal }),
  );
  return (await res.json()) as SystemOneReply;
}

/** POST {root}/api/models/<id>/<action>: make a model the active one ("load") or unload an idle one. */
export async function postModelAction(id: string, action: "load" | "unload", signal?: AbortSignal): Promise<void> {
  const url = joinUrl(feedRoot(base()), `api/models/${encodeURIComponent(id)}/${action}`);
  await checked(await fetch(url, { method: "POST", headers: headers(true), body: "{}", signal }));
}
