// Every page has an address: opening it shows that page (also after a
// reload), the dock's links and Alt+1..6 push addresses that back and forward
// walk, the dock's pages open in a new tab on a middle click, an address the
// app does not know shows Chat at /, and an old /#brain opens /brain. Against
// `vite preview` or a live `coli serve`: both answer any dotless path with
// index.html.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { launch, open } from "./browser";

const baseUrl = inject("baseUrl");
const ROUTES = [
  ["chat", "/chat"],
  ["systemone", "/system-one"],
  ["brain", "/brain"],
  ["profiling", "/profiling"],
  ["models", "/models"],
  ["settings", "/settings"],
] as const;

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

const pathname = (page: Page) => new URL(page.url()).pathname;
const hash = (page: Page) => new URL(page.url()).hash;

/** The page shows `p`, the dock marks it, and the address is `path`. */
async function showing(page: Page, p: string, path: string) {
  await page.waitForSelector(`[data-testid="page-${p}"]`);
  expect(await page.getAttribute(`[data-testid="dock-${p}"]`, "aria-current")).toBe("page");
  expect(pathname(page)).toBe(path);
}

describe("page addresses", () => {
  it("opens each page at its address, and a reload stays there", async () => {
    const { context, page, errors } = await open(browser, `${baseUrl}/brain`, { width: 1280, height: 800 });
    await showing(page, "brain", "/brain");
    await page.reload();
    await showing(page, "brain", "/brain");
    for (const [p, path] of ROUTES) {
      await page.goto(`${baseUrl}${path}`);
      await showing(page, p, path);
    }
    expect(errors).toEqual([]);
    await context.close();
  });

  it("shows Chat at /; dock clicks push addresses that back and forward walk", async () => {
    const { context, page, errors } = await open(browser, baseUrl, { width: 1280, height: 800 });
    await showing(page, "chat", "/");
    await page.click('[data-testid="dock-brain"]');
    await showing(page, "brain", "/brain");
    await page.click('[data-testid="dock-profiling"]');
    await showing(page, "profiling", "/profiling");
    await page.goBack();
    await showing(page, "brain", "/brain");
    await page.goBack();
    await showing(page, "chat", "/");
    await page.goForward();
    await showing(page, "brain", "/brain");
    await page.keyboard.press("Alt+2");
    await showing(page, "systemone", "/system-one");
    await page.goBack();
    await showing(page, "brain", "/brain");
    expect(errors).toEqual([]);
    await context.close();
  });

  it("the dock's pages are links: a middle click opens the page in a new tab", async () => {
    const { context, page } = await open(browser, baseUrl, { width: 1280, height: 800 });
    await page.waitForSelector('[data-testid="page-chat"]');
    for (const [p, path] of ROUTES) expect(await page.getAttribute(`[data-testid="dock-${p}"]`, "href")).toBe(path);
    const [tab] = await Promise.all([context.waitForEvent("page"), page.click('[data-testid="dock-profiling"]', { button: "middle" })]);
    await tab.waitForLoadState();
    await showing(tab, "profiling", "/profiling");
    await showing(page, "chat", "/"); // the first tab stayed where it was
    await context.close();
  });

  it("shows Chat at / for an address it does not know, and opens an old /#brain at /brain", async () => {
    const { context, page, errors } = await open(browser, `${baseUrl}/no-such-page`, { width: 1280, height: 800 });
    await showing(page, "chat", "/");
    await page.goto("about:blank"); // from / itself, /#brain would be a jump within the page, not a load
    await page.goto(`${baseUrl}/#brain`);
    await showing(page, "brain", "/brain");
    expect(hash(page)).toBe("");
    await page.goto(`${baseUrl}/#systemone`);
    await showing(page, "systemone", "/system-one");
    expect(errors).toEqual([]);
    await context.close();
  });
});
