// Starts `vite preview` on the built web/dist (a free port), unless
// COLI_BASE_URL points the browser tests at a live `coli serve`.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    baseUrl: string;
    live: boolean;
  }
}

const webDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      const port = typeof a === "object" && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

async function waitFor(url: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      const r = await fetch(url);
      if (r.ok) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > end) throw new Error(`${url} did not answer within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

let child: ChildProcess | null = null;

export default async function setup(project: TestProject) {
  const live = process.env.COLI_BASE_URL?.replace(/\/+$/, "");
  if (live) {
    project.provide("baseUrl", live);
    project.provide("live", true);
    return;
  }
  if (!existsSync(path.join(webDir, "dist", "index.html"))) throw new Error("web/dist is missing: run `npm run build` first");
  const port = await freePort();
  child = spawn(process.execPath, [path.join(webDir, "node_modules/vite/bin/vite.js"), "preview", "--host", "127.0.0.1", "--port", String(port), "--strictPort"], {
    cwd: webDir,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(url, 30_000);
  project.provide("baseUrl", url);
  project.provide("live", false);
  return async () => {
    if (child && child.exitCode === null) {
      child.kill("SIGTERM");
      await new Promise((r) => child!.once("exit", r));
    }
  };
}
