// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { useAuth } from "./auth";
import { useGeneration } from "./generation";

describe("auth store", () => {
  it("a 401 asks for the key; setting it closes the prompt, bumps the epoch and stores nothing", () => {
    const a = useAuth.getState();
    a.requireKey("Invalid API key");
    expect(useAuth.getState()).toMatchObject({ needKey: true, message: "Invalid API key" });
    const epoch = useAuth.getState().epoch;
    useAuth.getState().setKey("  sekret ");
    expect(useAuth.getState()).toMatchObject({ key: "sekret", needKey: false, epoch: epoch + 1 });
    expect(JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })).not.toContain("sekret");
    useAuth.getState().setKey("");
    expect(useAuth.getState().key).toBeNull();
  });
});

describe("generation store", () => {
  it("one controller per conversation: stop aborts only that one; a new start aborts the old", () => {
    const g = useGeneration.getState();
    const a = new AbortController();
    const b = new AbortController();
    g.start("c1", "m1", a);
    g.start("c2", "m2", b);
    useGeneration.getState().stop("c1");
    expect(a.signal.aborted).toBe(true);
    expect(b.signal.aborted).toBe(false);
    const b2 = new AbortController();
    useGeneration.getState().start("c2", "m3", b2);
    expect(b.signal.aborted).toBe(true);
    expect(useGeneration.getState().running.c2.msgId).toBe("m3");
    useGeneration.getState().finish("c1");
    useGeneration.getState().finish("c2");
    expect(useGeneration.getState().running).toEqual({});
  });
});
