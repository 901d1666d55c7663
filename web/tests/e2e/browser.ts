// One headless Chromium (Debian's, at /usr/bin/chromium or CHROMIUM_PATH)
// driven by playwright-core; no browser download.
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const SHOTS = process.env.COLI_E2E_OUT ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../build/e2e");

export function chromiumPath(): string {
  const candidates = [process.env.CHROMIUM_PATH, "/usr/bin/chromium", "/usr/bin/chromium-browser"].filter(Boolean) as string[];
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error("No chromium found: install Debian's `chromium` (web/test.sh does) or set CHROMIUM_PATH");
  return found;
}

export async function launch(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath(), headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"] });
}

export interface Opened {
  context: BrowserContext;
  page: Page;
  errors: string[];
  consoleErrors: string[];
}

export async function open(browser: Browser, url: string, opts: { width: number; height: number; scheme?: "light" | "dark" }): Promise<Opened> {
  const context = await browser.newContext({
    viewport: { width: opts.width, height: opts.height },
    colorScheme: opts.scheme ?? "light",
    deviceScaleFactor: 1,
    reducedMotion: "reduce",
  });
  const page = await context.newPage();
  const errors: string[] = [];
  const consoleErrors: string[] = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  await page.goto(url, { waitUntil: "load" });
  return { context, page, errors, consoleErrors };
}

export async function shot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: false });
}
