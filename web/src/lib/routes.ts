// Every page has an address below the app's base path (Vite's `base`, "/" as
// `coli serve` serves it): /chat, /system-one, /brain, /profiling, /settings.
// The base itself shows Chat, and so does any address the app does not know.
// /models lists the model library. `coli serve` (and `vite preview`) answer any dotless path with index.html,
// so a page can be bookmarked and reloaded where it was. hooks/usePage.ts
// follows the address; this module only reads and writes it.

export type Page = "chat" | "systemone" | "brain" | "profiling" | "models" | "settings";

/** The path of each page below the base, in dock order. */
export const PAGE_PATHS: Record<Page, string> = {
  chat: "chat",
  systemone: "system-one",
  brain: "brain",
  profiling: "profiling",
  models: "models",
  settings: "settings",
};
export const PAGES = Object.keys(PAGE_PATHS) as Page[];
export const DEFAULT_PAGE: Page = "chat";

/** The app's base path with one trailing slash; "/" unless it was built for a sub-path. */
export function basePath(base: string = import.meta.env.BASE_URL): string {
  return base.startsWith("/") ? base.replace(/\/*$/, "/") : "/";
}

export function pathOf(page: Page, base = basePath()): string {
  return `${base}${PAGE_PATHS[page]}`;
}

/** The page at an address; `null` for one the app does not know. The base (or its index.html) is the default page. */
export function pageAt(pathname: string, base = basePath()): Page | null {
  const root = base.replace(/\/$/, "");
  if (pathname !== root && !pathname.startsWith(base)) return null;
  const rest = pathname.slice(base.length).replace(/\/+$/, "");
  if (rest === "" || rest === "index.html") return DEFAULT_PAGE;
  return PAGES.find((p) => PAGE_PATHS[p] === rest) ?? null;
}

/** The page an old `#brain`-style address named (before pages had paths); null when none. */
export function pageInHash(hash: string): Page | null {
  const h = hash.replace(/^#\/?/, "");
  return (PAGES as string[]).includes(h) ? (h as Page) : null;
}

/**
 * Settles the address once at start-up: an old `/#brain` becomes `/brain`, an
 * address the app does not know becomes the base (which shows the default page).
 * Replaces the history entry; the search and any other fragment are kept.
 */
export function settleLocation(loc: Location | undefined = globalThis.location, hist: History | undefined = globalThis.history, base = basePath()): void {
  if (!loc || !hist) return;
  const legacy = pageInHash(loc.hash);
  if (legacy && pageAt(loc.pathname, base) === DEFAULT_PAGE) hist.replaceState(hist.state, "", `${pathOf(legacy, base)}${loc.search}`);
  else if (pageAt(loc.pathname, base) === null) hist.replaceState(hist.state, "", `${base}${loc.search}${loc.hash}`);
}
