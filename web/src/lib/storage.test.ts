// @vitest-environment jsdom
import { beforeEach, describe, expect, it } from "vitest";
import { loadJSON, newId, saveJSON } from "./storage";

describe("storage", () => {
  beforeEach(() => localStorage.clear());

  it("merges saved values over defaults, so new settings get their default", () => {
    saveJSON("k", { a: 5 });
    expect(loadJSON("k", { a: 1, b: 2 })).toEqual({ a: 5, b: 2 });
  });

  it("falls back to defaults on junk", () => {
    localStorage.setItem("k", "{not json");
    expect(loadJSON("k", { a: 1 })).toEqual({ a: 1 });
    localStorage.setItem("k", "[1,2]");
    expect(loadJSON("k", { a: 1 })).toEqual({ a: 1 });
  });

  it("makes unique ids that are not timestamps", () => {
    const ids = new Set(Array.from({ length: 100 }, newId));
    expect(ids.size).toBe(100);
    expect([...ids][0]).toMatch(/^[0-9a-f-]{32,36}$/);
  });
});
