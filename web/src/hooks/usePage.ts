// The page the address names (lib/routes.ts), followed through back and
// forward (popstate) and through goTo, which pushes a history entry. The dock's
// links call followLink: a plain click switches page in place; a middle click,
// or one with Ctrl, Cmd or Shift, is left to the browser (a new tab or window).
import { useSyncExternalStore, type MouseEvent } from "react";
import { DEFAULT_PAGE, pageAt, pathOf, type Page } from "../lib/routes";

const NAVIGATED = "colibri:navigated";

function subscribe(onChange: () => void): () => void {
  window.addEventListener("popstate", onChange);
  window.addEventListener(NAVIGATED, onChange);
  return () => {
    window.removeEventListener("popstate", onChange);
    window.removeEventListener(NAVIGATED, onChange);
  };
}

const currentPage = (): Page => pageAt(window.location.pathname) ?? DEFAULT_PAGE;

export function usePage(): Page {
  return useSyncExternalStore(subscribe, currentPage, () => DEFAULT_PAGE);
}

/** Switches to a page with a new history entry (none when it is already open). */
export function goTo(page: Page): void {
  const path = pathOf(page);
  if (window.location.pathname === path) return;
  window.history.pushState(null, "", path);
  window.dispatchEvent(new Event(NAVIGATED));
}

/** The onClick of a link to a page. */
export function followLink(page: Page) {
  return (e: MouseEvent<HTMLAnchorElement>) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    goTo(page);
  };
}
