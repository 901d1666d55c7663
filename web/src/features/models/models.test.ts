import { describe, expect, it } from "vitest";
import { fmtParams, loadFraction, parseModels, planLine, runsLabel, sortRows } from "./models";

const feed = {
  library: true,
  active: "alpha",
  models: [
    { id: "alpha", state: "active", arch: "qwen2", n_params: 494_000_000, runnable: true, reason: "loaded", plan: { placement: "resident", fits: true, ram_bytes: 1_000_000, ctx: 4096 } },
    { id: "zeta", state: "available", arch: "llama", runnable: null, quant_types: ["Q4_K", 7], size: 10 },
    { id: "alien", state: "available", arch: "mamba9", runnable: false, reason: "unsupported: architecture 'mamba9'" },
    { id: "beta", state: "weird", runnable: true },
    { nope: 1 },
  ],
  pool: { loading: { model: "zeta", phase: "reading", bytes_done: 25, bytes_total: 100 }, last_error: { model: "alien", message: "failed" } },
};

describe("models feed", () => {
  it("keeps the documented shape and drops the rest", () => {
    const f = parseModels(feed)!;
    expect(f.library).toBe(true);
    expect(f.models.map((m) => m.id)).toEqual(["alpha", "zeta", "alien", "beta"]);
    expect(f.models[1].quantTypes).toEqual(["Q4_K"]);
    expect(f.models[3].state).toBe("available");
    expect(f.loading).toEqual({ model: "zeta", phase: "reading", bytesDone: 25, bytesTotal: 100 });
    expect(f.lastError).toEqual({ model: "alien", message: "failed" });
    expect(parseModels({ models: "x" })).toBeNull();
    expect(parseModels(null)).toBeNull();
    expect(parseModels({ library: false, active: "m", models: [], pool: null })!.loading).toBeNull();
  });

  it("says how far a load is", () => {
    expect(loadFraction(null)).toBeNull();
    expect(loadFraction({ model: "m", phase: "planning", bytesDone: 0, bytesTotal: 9 })).toBeNull();
    expect(loadFraction({ model: "m", phase: "reading", bytesDone: 3, bytesTotal: 12 })).toBe(0.25);
    expect(loadFraction({ model: "m", phase: "reading", bytesDone: 30, bytesTotal: 12 })).toBe(1);
    expect(loadFraction({ model: "m", phase: "opening", bytesDone: 0, bytesTotal: 12 })).toBe(1);
  });

  it("orders, labels and formats rows", () => {
    const f = parseModels(feed)!;
    expect(sortRows(f.models).map((m) => m.id)).toEqual(["alpha", "beta", "zeta", "alien"]);
    expect(f.models.map(runsLabel)).toEqual(["runs", "likely", "cannot run", "runs"]);
    expect(planLine(f.models[0].plan, (n) => `${n} B`)).toBe("resident in RAM · 1000000 B");
    expect(planLine({ placement: "streaming", fits: false, reason: "", ctx: 1, ramBytes: 5, ramAvailable: 1 }, String)).toBe("experts stream from disk · 5 (does not fit)");
    expect(planLine(null, String)).toBe("—");
    expect(fmtParams(494_000_000)).toBe("494M");
    expect(fmtParams(1_540_000_000)).toBe("1.5B");
    expect(fmtParams(90_944)).toBe("91K");
    expect(fmtParams(null)).toBe("—");
  });
});
