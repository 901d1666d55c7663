// localStorage with defaults merged under what was saved, so a new setting
// gets its default on an old browser profile. Failures (private mode, quota)
// never break the page.

export function loadJSON<T extends object>(key: string, defaults: T): T {
  try {
    const raw = globalThis.localStorage?.getItem(key);
    if (!raw) return { ...defaults };
    const saved = JSON.parse(raw) as unknown;
    if (saved && typeof saved === "object" && !Array.isArray(saved)) return { ...defaults, ...(saved as Partial<T>) };
  } catch {
    /* unreadable: defaults */
  }
  return { ...defaults };
}

export function saveJSON(key: string, value: unknown): boolean {
  try {
    globalThis.localStorage?.setItem(key, JSON.stringify(value));
    return true;
  } catch {
    return false;
  }
}

export function newId(): string {
  const c = globalThis.crypto;
  if (c?.randomUUID) return c.randomUUID();
  const b = new Uint8Array(16);
  c.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}
