import { defineConfig } from "vitest/config";

// Browser tests: headless Debian chromium driven by playwright-core.
// COLI_BASE_URL=http://127.0.0.1:8000 points them at a live `coli serve`;
// without it they start `vite preview` on the built web/dist.
export default defineConfig({
  test: {
    include: ["tests/e2e/**/*.e2e.ts"],
    environment: "node",
    testTimeout: 60_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    globalSetup: ["tests/e2e/global-setup.ts"],
  },
});
