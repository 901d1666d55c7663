// The desktop launchers' hook (`coli web`, the Tauri app): they open the
// dashboard at `/#key=<API key>` so a server started with a key — the Tauri
// app makes a new one per launch — needs no prompt. The key is read once at
// start-up, kept in memory like a typed one (stores/auth.ts), and removed from
// the address and the history entry. A fragment never reaches the server.

const KEY_PARAM = /(^|&)key=([^&]*)/;

/** The launch key in the location's fragment, removed from it; null when none. */
export function takeLaunchKey(loc: Location | undefined = globalThis.location, hist: History | undefined = globalThis.history): string | null {
  if (!loc) return null;
  const fragment = loc.hash.replace(/^#/, "");
  const m = KEY_PARAM.exec(fragment);
  if (!m) return null;
  let key: string;
  try {
    key = decodeURIComponent(m[2]).trim();
  } catch {
    key = m[2];
  }
  const rest = (fragment.slice(0, m.index) + fragment.slice(m.index + m[0].length)).replace(/^&|&$/g, "");
  hist?.replaceState(hist.state, "", `${loc.pathname}${loc.search}${rest ? `#${rest}` : ""}`);
  return key || null;
}
