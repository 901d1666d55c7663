// Where the API lives (docs/dashboard-feeds.md#the-dashboard-client): a page served by the engine (any port but
// Vite's 5173) talks to its own origin; the Vite dev server talks to the
// default `coli serve` address. A saved override (Settings) wins over both,
// so Chat also works against any OpenAI-compatible endpoint.

export const DEV_PORT = "5173";
export const DEFAULT_API_BASE = "http://127.0.0.1:8000/v1";

export interface PageLocation {
  protocol: string;
  host: string;
  port: string;
  origin: string;
}

/** The API base URL, ending in `/v1` (no trailing slash). */
export function apiBase(loc: PageLocation, override?: string | null): string {
  const o = override?.trim();
  if (o) return o.replace(/\/+$/, "");
  if (loc.protocol === "http:" || loc.protocol === "https:") {
    if (loc.port !== DEV_PORT) return `${loc.origin}/v1`;
  }
  return DEFAULT_API_BASE;
}

/** `{root}` of the dashboard feeds: the base without its trailing `/v1`. */
export function feedRoot(base: string): string {
  return base.replace(/\/+$/, "").replace(/\/v1$/, "");
}

/** Joins a base and a path with exactly one slash. */
export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}/${path.replace(/^\/+/, "")}`;
}
