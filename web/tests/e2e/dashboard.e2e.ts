// The built dashboard in headless Chromium: every page renders, the dock and
// keyboard switch pages, the theme switches, phone and desktop layouts hold,
// and a server without the feeds gives calm empty states (no page errors).
// With COLI_BASE_URL set, the same checks run against a live `coli serve`,
// plus the live ones at the end.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Browser } from "playwright-core";
import { launch, open, shot } from "./browser";

const baseUrl = inject("baseUrl");
const live = inject("live");
const PAGES = ["chat", "systemone", "brain", "profiling", "models", "settings"] as const;

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

describe("dashboard", () => {
  for (const scheme of ["light", "dark"] as const) {
    it(`renders every page at 1440 px (${scheme})`, async () => {
      const { context, page, errors } = await open(browser, baseUrl, { width: 1440, height: 900, scheme });
      await expect.poll(() => page.evaluate(() => document.documentElement.dataset.theme)).toBe(scheme);
      for (const p of PAGES) {
        await page.click(`[data-testid="dock-${p}"]`);
        await page.waitForSelector(`[data-testid="page-${p}"]`);
        expect(await page.getAttribute(`[data-testid="dock-${p}"]`, "aria-current")).toBe("page");
        await page.waitForTimeout(300);
        await shot(page, `${p}-1440-${scheme}`);
      }
      expect(errors).toEqual([]);
      await context.close();
    });
  }

  it("renders every page at 390 px with the dock at the bottom and no sideways scroll", async () => {
    for (const scheme of ["light", "dark"] as const) {
      const { context, page, errors } = await open(browser, baseUrl, { width: 390, height: 844, scheme });
      const dock = await page.locator("nav.dock").boundingBox();
      expect(dock).not.toBeNull();
      expect(dock!.y + dock!.height).toBeGreaterThan(800);
      expect(dock!.width).toBeGreaterThan(380);
      for (const p of PAGES) {
        await page.click(`[data-testid="dock-${p}"]`);
        await page.waitForSelector(`[data-testid="page-${p}"]`);
        await page.waitForTimeout(250);
        const overflow = await page.evaluate(() => {
          const main = document.querySelector("main")!;
          return Math.max(document.documentElement.scrollWidth, main.scrollWidth) - window.innerWidth;
        });
        expect(overflow, `${p} scrolls sideways`).toBeLessThanOrEqual(0);
        await shot(page, `${p}-390-${scheme}`);
      }
      expect(errors).toEqual([]);
      await context.close();
    }
  });

  it("switches theme from the dock, with Alt+T, and from Settings; the choice survives a reload", async () => {
    const { context, page } = await open(browser, baseUrl, { width: 1280, height: 800, scheme: "light" });
    const theme = () => page.evaluate(() => document.documentElement.dataset.theme);
    expect(await theme()).toBe("light");
    await page.click('[data-testid="theme-toggle"]'); // system → light
    expect(await theme()).toBe("light");
    await page.click('[data-testid="theme-toggle"]'); // light → dark
    expect(await theme()).toBe("dark");
    await page.reload();
    expect(await theme()).toBe("dark");
    await page.keyboard.press("Alt+t"); // dark → system (light here)
    expect(await theme()).toBe("light");
    await page.click('[data-testid="dock-settings"]');
    await page.click('[data-testid="theme-choice"] >> text=Dark');
    expect(await theme()).toBe("dark");
    await context.close();
  });

  it("is keyboard usable: Alt+1..6 switch pages, Tab reaches the dock", async () => {
    const { context, page } = await open(browser, baseUrl, { width: 1280, height: 800 });
    for (const [i, p] of PAGES.entries()) {
      await page.keyboard.press(`Alt+${i + 1}`);
      await page.waitForSelector(`[data-testid="page-${p}"]`);
    }
    await page.keyboard.press("Alt+1");
    await page.focus('[data-testid="dock-brain"]');
    await page.keyboard.press("Enter");
    await page.waitForSelector('[data-testid="page-brain"]');
    await context.close();
  });

  it.runIf(!live)("without the feeds: Brain and Profiling explain themselves, quietly", async () => {
    const { context, page, errors, consoleErrors } = await open(browser, `${baseUrl}/brain`, { width: 1280, height: 800 });
    await page.waitForSelector('[data-testid="brain-empty"]');
    await page.click('[data-testid="dock-profiling"]');
    await page.waitForSelector('[data-testid="profiling-empty"]');
    await page.waitForTimeout(4000);
    expect(errors).toEqual([]);
    // A server without the feeds answers 404 or HTML: no error reaches the console.
    expect(consoleErrors.length, consoleErrors.join("\n")).toBeLessThanOrEqual(2);
    await context.close();
  });

  it("System One refuses a file with NUL bytes and loads a text file", async () => {
    const { context, page } = await open(browser, `${baseUrl}/system-one`, { width: 1280, height: 800 });
    await page.waitForSelector('[data-testid="page-systemone"]');
    const input = page.locator('[data-testid="s1-file"]');
    await input.setInputFiles({ name: "binary.bin", mimeType: "application/octet-stream", buffer: Buffer.from([0x41, 0x00, 0x42]) });
    await page.waitForSelector("text=contains NUL bytes");
    await input.setInputFiles({ name: "note.txt", mimeType: "text/plain", buffer: Buffer.from("The printer is on fire.") });
    await expect.poll(() => page.inputValue('[data-testid="s1-doc"]')).toBe("The printer is on fire.");
    expect(await page.locator('[data-testid="s1-question"]').count()).toBe(3);
    await context.close();
  });

  it("Chat: a conversation is kept in the browser and the composer sends on Enter", async () => {
    const { context, page } = await open(browser, `${baseUrl}/chat`, { width: 1280, height: 800 });
    await page.waitForSelector('[data-testid="chat-empty"]');
    await page.fill('[data-testid="composer"]', "Hello there");
    await page.press('[data-testid="composer"]', "Enter");
    await page.waitForSelector('[data-testid="msg-user"]');
    await page.waitForSelector('[data-testid="msg-assistant"]');
    if (live) await page.keyboard.press("Escape"); // Esc stops a live answer
    if (!live) {
      // No server: the answer says so instead of spinning.
      await page.waitForSelector(".msg-error", { timeout: 15_000 });
      await shot(page, "chat-no-server-1440-light");
    }
    await page.reload();
    await page.waitForSelector('[data-testid="msg-user"]');
    expect(await page.locator(".conv-item").count()).toBe(1);
    await context.close();
  });
});

describe.runIf(live)("against a live coli serve", () => {
  it("streams a chat answer, shows its timing, and Stop ends it", async () => {
    const { context, page, errors } = await open(browser, `${baseUrl}/chat`, { width: 1440, height: 900 });
    await page.waitForSelector('[data-testid="link-status"].link-online');
    await page.fill('[data-testid="composer"]', "Say hello in five words.");
    await page.press('[data-testid="composer"]', "Enter");
    const answer = page.locator('[data-testid="msg-assistant"] .md').last();
    await expect.poll(() => answer.innerText().catch(() => ""), { timeout: 60_000 }).not.toBe("");
    // Timing shows while it streams, and stays on the message once done (a
    // fast engine can finish a short answer between two polls).
    await page.waitForSelector('[data-testid="live-stats"]:has-text("TTFT"), .msg-stats:has-text("TTFT")');
    // Streamed: the text keeps growing (or the answer already finished).
    const first = (await answer.innerText()).length;
    await page.waitForTimeout(1500);
    const running = (await page.locator('[data-testid="stop"]').count()) > 0;
    if (running) {
      expect((await answer.innerText()).length).toBeGreaterThanOrEqual(first);
      await page.click('[data-testid="stop"]');
    }
    await page.waitForSelector('[data-testid="send"]', { timeout: 30_000 });
    await page.waitForSelector('.msg-stats:has-text("TTFT")');
    await shot(page, "live-chat");
    expect(errors).toEqual([]);
    await context.close();
  });

  it("answers a System One question (or says the server has no System One)", async () => {
    const health = (await (await fetch(`${baseUrl}/health`)).json()) as { capabilities?: string[] };
    const { context, page } = await open(browser, `${baseUrl}/system-one`, { width: 1440, height: 900 });
    await page.waitForSelector('[data-testid="link-status"].link-online');
    await page.click('[data-testid="s1-ask"]');
    if (health.capabilities && !health.capabilities.includes("systemone")) {
      await page.waitForSelector('[data-testid="s1-unsupported"]');
      await page.waitForSelector(".s1-answer.msg-error", { timeout: 120_000 });
    } else {
      await page.waitForSelector('[data-testid="s1-answer"]', { timeout: 120_000 });
    }
    await shot(page, "live-systemone");
    await context.close();
  });

  it("shows a Profiling bar after a turn, and Brain cells flashing while the model answers (or the dense notice)", async () => {
    const { context, page, errors } = await open(browser, `${baseUrl}/profiling`, { width: 1440, height: 900 });
    await page.waitForSelector('[data-testid="profile-turn"]', { timeout: 30_000 });
    // six phases in the turn's stack (linear attention among them), one disk bar beside it
    expect(await page.locator('[data-testid="profile-turn"] .stack:not(.disk) .stack-seg').count()).toBe(6);
    expect(await page.locator('[data-testid="profile-turn"] .stack.disk .stack-seg').count()).toBe(1);
    await shot(page, "live-profiling");
    await page.click('[data-testid="dock-brain"]');
    await page.waitForSelector('[data-testid="live-canvas"], [data-testid="brain-dense"]', { timeout: 30_000 });
    if ((await page.locator('[data-testid="live-canvas"]').count()) > 0) {
      // Make the model route some tokens while the page watches.
      const health = (await (await fetch(`${baseUrl}/health`)).json()) as { model?: string };
      const generating = fetch(`${baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ model: health.model, messages: [{ role: "user", content: "Count to fifty." }], max_tokens: 120 }),
      });
      await expect
        .poll(async () => Number(await page.getAttribute('[data-testid="live-canvas"]', "data-flashed")), { timeout: 30_000 })
        .toBeGreaterThan(0);
      await shot(page, "live-brain");
      await generating;
      await page.click('[data-testid="brain-tab-explore"]');
      await page.waitForSelector('[data-testid="explore-canvas"], [data-testid="explore-empty"]', { timeout: 60_000 });
      await shot(page, "live-brain-explore");
    } else {
      await shot(page, "live-brain-dense");
    }
    expect(errors).toEqual([]);
    await context.close();
  });
});

// Chat's model picker over a three-model library (served by request interception, so it runs the
// same with or without a live server): shown at 390 px in both schemes, remembered across a
// reload, named in the request, and a model only on disk is loaded when picked.
describe("chat model picker", () => {
  it("picks, remembers and sends the model at 390 px (light and dark)", async () => {
    for (const scheme of ["light", "dark"] as const) {
      const { context, page, errors } = await open(browser, "about:blank", { width: 390, height: 844, scheme });
      const json = (body: unknown) => ({ status: 200, contentType: "application/json", body: JSON.stringify(body) });
      const sent: string[] = [];
      const loads: string[] = [];
      const row = (id: string, state: string) => ({ id, state, arch: "qwen2", runnable: true, size: 491_400_064, n_params: 494_000_000 });
      await page.route(/\/health$/, (r) => r.fulfill(json({ status: "ok", model: "qwen2.5-coder-0.5b-instruct", arch: "qwen2", kv_slots: 1, reasoning: "none" })));
      await page.route(/\/v1\/models$/, (r) => r.fulfill(json({ object: "list", data: ["qwen2.5-coder-0.5b-instruct", "gemma-3-270m"].map((id) => ({ id, object: "model" })) })));
      await page.route(/\/api\/models$/, (r) =>
        r.fulfill(json({ library: true, active: "qwen2.5-coder-0.5b-instruct", models: [row("qwen2.5-coder-0.5b-instruct", "active"), row("gemma-3-270m", "loaded"), row("qwen2.5-coder-1.5b-instruct-with-a-long-name", "available")], pool: { loading: { model: "gemma-3-270m", phase: "reading", bytes_done: 100, bytes_total: 400 } } })),
      );
      await page.route(/\/api\/models\/[^/]+\/load$/, (r) => {
        loads.push(decodeURIComponent(r.request().url().split("/").slice(-2)[0]));
        return r.fulfill(json({ active: "x" }));
      });
      await page.route(/\/v1\/chat\/completions$/, (r) => {
        sent.push((JSON.parse(r.request().postData() ?? "{}") as { model: string }).model);
        const chunk = { id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "Hello." }, finish_reason: "stop" }] };
        return r.fulfill({ status: 200, contentType: "text/event-stream", body: `data: ${JSON.stringify(chunk)}\n\ndata: [DONE]\n\n` });
      });
      await page.goto(`${baseUrl}/chat`);
      const picker = page.locator('[data-testid="model-picker"]');
      await picker.waitFor();
      expect(await picker.locator("option").count()).toBe(3);
      expect(await picker.inputValue()).toBe("qwen2.5-coder-0.5b-instruct");
      await page.waitForSelector('[data-testid="chat-model-loading"]'); // the load in progress, with its bar
      await picker.selectOption("gemma-3-270m");
      await page.fill('[data-testid="composer"]', "Hi");
      await page.click('[data-testid="send"]');
      await expect.poll(() => sent).toEqual(["gemma-3-270m"]);
      expect(loads).toEqual([]); // already loaded: nothing to do
      await picker.selectOption("qwen2.5-coder-1.5b-instruct-with-a-long-name");
      await expect.poll(() => loads).toEqual(["qwen2.5-coder-1.5b-instruct-with-a-long-name"]);
      const overflow = await page.evaluate(() => Math.max(document.documentElement.scrollWidth, document.querySelector("main")!.scrollWidth) - window.innerWidth);
      expect(overflow, "chat scrolls sideways").toBeLessThanOrEqual(0);
      await shot(page, `chat-model-picker-390-${scheme}`);
      await page.reload();
      await picker.waitFor();
      expect(await picker.inputValue()).toBe("qwen2.5-coder-1.5b-instruct-with-a-long-name"); // remembered
      expect(errors).toEqual([]);
      await context.close();
    }
  });
});
