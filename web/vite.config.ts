import { defineConfig } from "vitest/config";
import react from "@vitejs/plugin-react";

// The dashboard is served by `coli serve` from web/dist on the engine's port;
// `npm run dev` serves it on 5173, where it talks to http://127.0.0.1:8000/v1.
export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "dist",
    target: "es2022",
    chunkSizeWarningLimit: 400,
  },
  server: { port: 5173, strictPort: true },
  preview: { port: 4173, strictPort: false },
  test: {
    include: ["src/**/*.test.ts", "src/**/*.test.tsx"],
    environment: "node",
  },
});
