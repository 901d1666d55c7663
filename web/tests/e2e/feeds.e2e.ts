// Brain and Profiling drawing the documented feed shapes (synthetic
// telemetry served by request interception; the preview server has no
// engine). Runs only without COLI_BASE_URL: a live server has real feeds.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { launch, open, shot } from "./browser";
import * as fx from "./feed-fixtures";

const baseUrl = inject("baseUrl");
const live = inject("live");

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

async function serveFeeds(page: Page, opts: { dense?: boolean } = {}) {
  let seq = 1;
  const json = (body: unknown) => ({ status: 200, contentType: "application/json", body: JSON.stringify(body) });
  await page.route(/\/health$/, (r) => r.fulfill(json(opts.dense ? { ...fx.health(), model: "gemma-3-270m", arch: "gemma3", moe: null, tiers: undefined, reasoning: "none", kv_slots: 1 } : fx.health())));
  await page.route(/\/experts(\?.*)?$/, (r) => {
    if (opts.dense) return r.fulfill(json({ v: 1, rows: 0, cols: 0, layers: [], seq: 0, map: "", hits: "" }));
    return r.fulfill(json(fx.experts(seq++, r.request().url().includes("counts=1"))));
  });
  await page.route(/\/experts\/coroute/, (r) => r.fulfill(json(fx.coroute())));
  await page.route(/\/profile$/, (r) => r.fulfill(json(fx.profile())));
}

describe.runIf(!live)("feeds drawn", () => {
  for (const scheme of ["dark", "light"] as const) {
    it(`Brain live routing: cells, flashes, tooltip (${scheme})`, async () => {
      const { context, page, errors } = await open(browser, "about:blank", { width: 1440, height: 900, scheme });
      await serveFeeds(page);
      await page.goto(`${baseUrl}/brain`);
      const canvas = page.locator('[data-testid="live-canvas"]');
      await canvas.waitFor();
      // A new seq flashes the experts it routed...
      await expect.poll(async () => Number(await canvas.getAttribute("data-flashed")), { timeout: 8000 }).toBeGreaterThan(0);
      // ...and the canvas shows cells whiter than any tier colour can be (min channel > 120).
      await expect
        .poll(
          () =>
            page.evaluate(() => {
              const c = document.querySelector<HTMLCanvasElement>('[data-testid="live-canvas"]')!;
              const d = c.getContext("2d")!.getImageData(0, 0, c.width, c.height).data;
              let white = 0;
              for (let i = 0; i < d.length; i += 4) if (Math.min(d[i], d[i + 1], d[i + 2]) > 120) white++;
              return white;
            }),
          { timeout: 10000, interval: 80 },
        )
        .toBeGreaterThan(0);
      const box = (await canvas.boundingBox())!;
      await page.mouse.move(box.x + box.width * 0.3, box.y + box.height * 0.4);
      await page.waitForSelector('[data-testid="brain-tooltip"]');
      expect(await page.locator('[data-testid="brain-tooltip"]').innerText()).toMatch(/Layer \d+ · expert \d+/);
      await shot(page, `brain-live-1440-${scheme}`);
      await page.click('[data-testid="brain-tab-explore"]');
      await page.locator('[data-testid="explore-canvas"]').waitFor({ timeout: 20_000 });
      await page.waitForTimeout(500);
      await shot(page, `brain-explore-1440-${scheme}`);
      expect(errors).toEqual([]);
      await context.close();
    });
  }

  it("Brain at phone width", async () => {
    const { context, page, errors } = await open(browser, "about:blank", { width: 390, height: 844, scheme: "dark" });
    await serveFeeds(page);
    await page.goto(`${baseUrl}/brain`);
    await page.locator('[data-testid="live-canvas"]').waitFor();
    await page.waitForTimeout(400);
    await shot(page, "brain-live-390-dark");
    await page.click('[data-testid="brain-tab-explore"]');
    await page.locator('[data-testid="explore-canvas"]').waitFor({ timeout: 20_000 });
    await shot(page, "brain-explore-390-dark");
    const overflow = await page.evaluate(() => document.querySelector("main")!.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    expect(errors).toEqual([]);
    await context.close();
  });

  it("a dense model says so instead of drawing an empty brain", async () => {
    const { context, page } = await open(browser, "about:blank", { width: 1440, height: 900 });
    await serveFeeds(page, { dense: true });
    await page.goto(`${baseUrl}/brain`);
    await page.waitForSelector('[data-testid="brain-dense"]');
    expect(await page.locator('[data-testid="live-canvas"]').count()).toBe(0);
    await shot(page, "brain-dense-1440-light");
    await context.close();
  });

  for (const [w, h, scheme] of [[1440, 900, "light"], [1440, 900, "dark"], [390, 844, "light"]] as const) {
    it(`Profiling: last turn stack, disk beside it, history charts, tiers and machine (${w} ${scheme})`, async () => {
      const { context, page, errors } = await open(browser, "about:blank", { width: w, height: h, scheme });
      await serveFeeds(page);
      await page.goto(`${baseUrl}/profiling`);
      await page.waitForSelector('[data-testid="profile-turn"]');
      await page.waitForSelector('[data-testid="profile-history"] canvas');
      // Six phases (linear attention included) in the turn's stack, one disk bar beside it.
      expect(await page.locator(".stack:not(.disk) .stack-seg").count()).toBe(6);
      expect(await page.locator(".stack.disk .stack-seg").count()).toBe(1);
      await page.waitForTimeout(300);
      await shot(page, `profiling-data-${w}-${scheme}`);
      expect(errors).toEqual([]);
      await context.close();
    });
  }

  it("Chat shows the slot picker and the reasoning toggle only when the server has them", async () => {
    const { context, page } = await open(browser, "about:blank", { width: 1440, height: 900 });
    await serveFeeds(page);
    await page.goto(`${baseUrl}/chat`);
    await page.waitForSelector('[data-testid="slot-picker"]');
    await page.waitForSelector('[data-testid="reasoning-toggle"]', { state: "attached" });
    expect(await page.locator('[data-testid="attach-image"]').count()).toBe(0);
    expect(await page.locator('[data-testid="chat-model"]').innerText()).toBe("qwen3-30b-a3b");
    await shot(page, "chat-tools-1440-light");
    await context.close();
    const dense = await open(browser, "about:blank", { width: 1440, height: 900 });
    await serveFeeds(dense.page, { dense: true });
    await dense.page.goto(`${baseUrl}/chat`);
    await dense.page.waitForSelector("text=gemma-3-270m");
    expect(await dense.page.locator('[data-testid="slot-picker"]').count()).toBe(0);
    expect(await dense.page.locator('[data-testid="reasoning-toggle"]').count()).toBe(0);
    await dense.context.close();
  });
});

describe.runIf(!live)("scale", () => {
  it("draws 100k experts (60 layers × 1,700) live and on the Explore map without errors", async () => {
    const { context, page, errors } = await open(browser, "about:blank", { width: 1440, height: 900, scheme: "dark" });
    const rows = 60;
    const cols = 1700;
    const n = rows * cols;
    const map = Buffer.alloc(n);
    for (let i = 0; i < n; i++) map[i] = ((i * 2654435761) >>> 0) % 3 === 0 ? (1 << 6) | (i % 30) : i % 9;
    let seq = 1;
    const hits = () => {
      const b = Buffer.alloc(Math.ceil(n / 8));
      for (let r = 0; r < rows; r++) for (let k = 0; k < 8; k++) {
        const i = r * cols + ((seq * 131 + k * 197 + r * 17) % cols);
        b[i >> 3] |= 1 << (i & 7);
      }
      return b.toString("base64");
    };
    const k = 4;
    const nbr = Buffer.alloc(n * k * 4);
    const w = Buffer.alloc(n * k);
    for (let i = 0; i < n; i++)
      for (let s = 0; s < k; s++) {
        const row = Math.floor(i / cols);
        const j = Math.min(rows - 1, row + (s % 2)) * cols + ((i % cols) + 50 * (s + 1)) % cols;
        nbr.writeUInt32LE(j === i ? 0xffffffff : j, (i * k + s) * 4);
        w[i * k + s] = j === i ? 0 : 100 + s;
      }
    const json = (body: unknown) => ({ status: 200, contentType: "application/json", body: JSON.stringify(body) });
    await page.route(/\/health$/, (r) => r.fulfill(json({ status: "ok", model: "big-moe" })));
    await page.route(/\/experts(\?.*)?$/, (r) => r.fulfill(json({ v: 1, rows, cols, layers: Array.from({ length: rows }, (_, i) => i + 1), seq: seq++, map: map.toString("base64"), hits: hits(), tokens: 1000 })));
    await page.route(/\/experts\/coroute/, (r) => r.fulfill(json({ v: 1, rows, cols, k, tokens: 1000, nbr: nbr.toString("base64"), w: w.toString("base64") })));
    await page.goto(`${baseUrl}/brain`);
    await page.locator('[data-testid="live-canvas"]').waitFor();
    await expect.poll(async () => Number(await page.getAttribute('[data-testid="live-canvas"]', "data-flashed")), { timeout: 10_000 }).toBeGreaterThan(0);
    await shot(page, "brain-live-100k-dark");
    await page.click('[data-testid="brain-tab-explore"]');
    await page.locator('[data-testid="explore-canvas"]').waitFor({ timeout: 45_000 });
    await page.waitForTimeout(500);
    await shot(page, "brain-explore-100k-dark");
    expect(errors).toEqual([]);
    await context.close();
  }, 90_000);
});

describe.runIf(!live)("API key", () => {
  it("a 401 opens the key prompt; the key (memory only) goes out as a Bearer token", async () => {
    const { context, page, errors } = await open(browser, "about:blank", { width: 1280, height: 800 });
    const seen: string[] = [];
    const json = (status: number, body: unknown) => ({ status, contentType: "application/json", body: JSON.stringify(body) });
    const authed = (h: Record<string, string>) => h.authorization === "Bearer sekret";
    await page.route(/\/health$/, (r) => r.fulfill(json(200, authed(r.request().headers()) ? fx.health() : { status: "ok" })));
    await page.route(/\/v1\/models$/, (r) => {
      seen.push(r.request().headers().authorization ?? "");
      return r.fulfill(
        authed(r.request().headers())
          ? json(200, { object: "list", data: [{ id: "qwen3-30b-a3b", object: "model" }] })
          : json(401, { error: { message: "Invalid API key", type: "authentication_error", param: null, code: "invalid_api_key" } }),
      );
    });
    await page.goto(`${baseUrl}/brain`);
    await page.waitForSelector('[data-testid="key-dialog"][open]');
    await shot(page, "key-prompt-1280-light");
    await page.click("text=Not now");
    await page.waitForSelector('[data-testid="key-needed"]');
    await page.click('[data-testid="key-needed"] >> text=Enter the key');
    await page.fill('[data-testid="key-dialog"] input', "sekret");
    await page.press('[data-testid="key-dialog"] input', "Enter");
    await expect.poll(() => seen.includes("Bearer sekret"), { timeout: 10_000 }).toBe(true);
    await page.waitForSelector('[data-testid="link-status"].link-online');
    // The key is never stored.
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
    expect(stored).not.toContain("sekret");
    expect(errors).toEqual([]);
    await context.close();
  });
});

describe.runIf(!live)("routing stream", () => {
  it("flashes the steps /events streams, between polls", async () => {
    const { context, page, errors } = await open(browser, "about:blank", { width: 1280, height: 800, scheme: "dark" });
    const json = (body: unknown) => ({ status: 200, contentType: "application/json", body: JSON.stringify(body) });
    const still = fx.experts(1, true); // the poll never moves seq: any flash comes from the stream
    const hits = Buffer.alloc(Math.ceil((fx.ROWS * fx.COLS) / 8));
    hits[0] = 0xff;
    const events = [2, 3].map((seq) => `event: routing\ndata: ${JSON.stringify({ seq, rows: fx.ROWS, cols: fx.COLS, hits: hits.toString("base64") })}\n\n`).join("");
    await page.route(/\/health$/, (r) => r.fulfill(json(fx.health())));
    await page.route(/\/experts(\?.*)?$/, (r) => r.fulfill(json(still)));
    let served = 0;
    await page.route(/\/events$/, async (r) => {
      // Hold the stream back until the map has arrived, as a live server would be mid-generation.
      await new Promise((res) => setTimeout(res, 800 + 400 * served++));
      await r.fulfill({ status: 200, contentType: "text/event-stream", body: `: hello\n\n${events}` });
    });
    await page.goto(`${baseUrl}/brain`);
    const canvas = page.locator('[data-testid="live-canvas"]');
    await canvas.waitFor();
    await expect.poll(async () => Number(await canvas.getAttribute("data-flashed")), { timeout: 10_000 }).toBe(8);
    expect(errors).toEqual([]);
    await context.close();
  });
});
