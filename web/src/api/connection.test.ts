import { describe, expect, it } from "vitest";
import { apiBase, DEFAULT_API_BASE, feedRoot, joinUrl } from "./connection";

const loc = (origin: string) => {
  const u = new URL(origin);
  return { protocol: u.protocol, host: u.host, port: u.port, origin: u.origin };
};

describe("connection", () => {
  it("served by the engine (port ≠ 5173): origin/v1", () => {
    expect(apiBase(loc("http://127.0.0.1:8000"))).toBe("http://127.0.0.1:8000/v1");
    expect(apiBase(loc("http://localhost:9001"))).toBe("http://localhost:9001/v1");
    expect(apiBase(loc("https://llm.example.com"))).toBe("https://llm.example.com/v1");
  });

  it("under the Vite dev server (5173): the default coli serve address", () => {
    expect(apiBase(loc("http://localhost:5173"))).toBe(DEFAULT_API_BASE);
  });

  it("from a file or a Tauri shell: the default address", () => {
    expect(apiBase({ protocol: "file:", host: "", port: "", origin: "null" })).toBe(DEFAULT_API_BASE);
    expect(apiBase({ protocol: "tauri:", host: "localhost", port: "", origin: "tauri://localhost" })).toBe(DEFAULT_API_BASE);
  });

  it("an override wins, without its trailing slash", () => {
    expect(apiBase(loc("http://127.0.0.1:8000"), "https://api.example.com/v1/")).toBe("https://api.example.com/v1");
    expect(apiBase(loc("http://127.0.0.1:8000"), "  ")).toBe("http://127.0.0.1:8000/v1");
  });

  it("feeds live at the root, without /v1", () => {
    expect(feedRoot("http://127.0.0.1:8000/v1")).toBe("http://127.0.0.1:8000");
    expect(feedRoot("http://127.0.0.1:8000/v1/")).toBe("http://127.0.0.1:8000");
    expect(feedRoot("http://host/api")).toBe("http://host/api");
    expect(joinUrl("http://h/v1/", "/models")).toBe("http://h/v1/models");
  });
});
