// One error type for everything the server (or the network) says, carrying
// the server's own message. `describeError` is the one place that turns any
// thrown value into words for the UI.

export class ApiError extends Error {
  readonly status: number;
  readonly code: string | null;
  readonly param: string | null;

  constructor(status: number, message: string, code: string | null = null, param: string | null = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.param = param;
  }
}

/** Builds an ApiError from a non-2xx response, reading the OpenAI error envelope when there is one. */
export async function errorFromResponse(res: Response): Promise<ApiError> {
  let text = "";
  try {
    text = await res.text();
  } catch {
    /* body unreadable: the status speaks */
  }
  try {
    const body = JSON.parse(text) as unknown;
    if (body && typeof body === "object") {
      const err = (body as { error?: unknown }).error;
      if (err && typeof err === "object") {
        const e = err as { message?: unknown; code?: unknown; param?: unknown; type?: unknown };
        const msg = typeof e.message === "string" ? e.message : `HTTP ${res.status}`;
        return new ApiError(res.status, msg, typeof e.code === "string" ? e.code : null, typeof e.param === "string" ? e.param : null);
      }
      const detail = (body as { detail?: unknown }).detail;
      if (typeof detail === "string") return new ApiError(res.status, detail);
    }
  } catch {
    /* not JSON */
  }
  const short = text && text.length < 200 && !text.trimStart().startsWith("<") ? `: ${text.trim()}` : "";
  return new ApiError(res.status, `HTTP ${res.status} ${res.statusText}${short}`.trim());
}

export function isAbort(e: unknown): boolean {
  return e instanceof DOMException && e.name === "AbortError";
}

export function describeError(e: unknown): string {
  if (e instanceof ApiError) {
    if (e.status === 0) return e.message;
    return e.param ? `${e.message} (${e.param})` : e.message;
  }
  if (e instanceof TypeError) return "The server did not answer. Is `coli serve` running?";
  if (e instanceof Error) return e.message;
  return String(e);
}
