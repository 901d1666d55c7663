// @vitest-environment jsdom
import { beforeEach, describe, expect, it } from "vitest";
import { parseModels } from "../models/models";
import { effectiveModel, modelOptions, needsLoad, stateLabel, useChatModel } from "./modelChoice";

const feed = parseModels({
  library: true,
  active: "beta",
  models: [
    { id: "zeta", state: "available", runnable: null },
    { id: "alien", state: "available", runnable: false, reason: "unsupported" },
    { id: "beta", state: "active", runnable: true },
    { id: "alpha", state: "loaded", runnable: true },
    { id: "gamma", state: "available", runnable: true },
  ],
  pool: { loading: { model: "gamma", phase: "reading", bytes_done: 1, bytes_total: 4 } },
})!;

describe("chat model picker", () => {
  beforeEach(() => {
    localStorage.clear();
    useChatModel.setState({ chosen: null, options: [] });
  });

  it("offers what runs: active first, then loaded or loading, then the rest; ids only /v1/models lists last", () => {
    const opts = modelOptions(["beta", "extra"], feed);
    expect(opts.map((o) => o.id)).toEqual(["beta", "alpha", "gamma", "zeta", "extra"]);
    expect(opts.map((o) => o.state)).toEqual(["active", "loaded", "loading", "available", null]);
    expect(opts.map(stateLabel)).toEqual(["loaded · active", "loaded", "loading…", "not loaded", ""]);
    expect(modelOptions(["m2", "m1"], null)).toEqual([{ id: "m1", state: null }, { id: "m2", state: null }]);
  });

  it("sends the pick when the server has it, else the server's model", () => {
    const opts = modelOptions([], feed);
    expect(effectiveModel("zeta", opts, "beta")).toBe("zeta");
    expect(effectiveModel("alien", opts, "beta")).toBe("beta"); // cannot run: not offered
    expect(effectiveModel("elsewhere", opts, "beta")).toBe("beta");
    expect(effectiveModel(null, opts, null)).toBe("beta");
    expect(effectiveModel(null, [], null)).toBeNull();
  });

  it("loads a picked model that is only on disk", () => {
    const opts = modelOptions([], feed);
    expect(opts.filter(needsLoad).map((o) => o.id)).toEqual(["zeta"]);
    expect(needsLoad(undefined)).toBe(false);
  });

  it("remembers the pick in localStorage", () => {
    useChatModel.getState().choose("zeta");
    expect(JSON.parse(localStorage.getItem("colibri.chatModel")!)).toEqual({ chosen: "zeta" });
    useChatModel.getState().choose(null);
    expect(JSON.parse(localStorage.getItem("colibri.chatModel")!)).toEqual({ chosen: null });
  });
});
