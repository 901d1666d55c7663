// @vitest-environment jsdom
import { act } from "react";
import { createRoot, type Root } from "react-dom/client";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Outcome, Try } from "../lib/poll";
import { usePoll, type PollOptions } from "./usePoll";

declare global {
  var IS_REACT_ACT_ENVIRONMENT: boolean | undefined;
}

const BACKOFF = { maxMs: 30_000, maxDoublings: 4 };

function Poller({ tryOnce, opts }: { tryOnce: Try; opts: PollOptions }) {
  usePoll(tryOnce, opts);
  return null;
}

let root: Root;
const render = (tryOnce: Try, opts: Partial<PollOptions> = {}) =>
  act(() => root.render(<Poller tryOnce={tryOnce} opts={{ intervalMs: 1000, backoff: BACKOFF, ...opts }} />));
const advance = (ms: number) => act(() => vi.advanceTimersByTimeAsync(ms));

beforeEach(() => {
  globalThis.IS_REACT_ACT_ENVIRONMENT = true;
  vi.useFakeTimers();
  root = createRoot(document.createElement("div"));
});
afterEach(() => {
  act(() => root.unmount());
  vi.useRealTimers();
});

describe("usePoll", () => {
  it("tries once on mount, then each interval; unmounting aborts the try in flight and stops", async () => {
    const signals: AbortSignal[] = [];
    const tryOnce = vi.fn(async (s: AbortSignal): Promise<Outcome> => (signals.push(s), "hit"));
    await render(tryOnce);
    expect(tryOnce).toHaveBeenCalledTimes(1);
    await advance(2000);
    expect(tryOnce).toHaveBeenCalledTimes(3);
    act(() => root.unmount());
    expect(signals.every((s) => s.aborted)).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(tryOnce).toHaveBeenCalledTimes(3);
    root = createRoot(document.createElement("div")); // for afterEach
  });

  it("backs off while the tries miss", async () => {
    const tryOnce = vi.fn(async (): Promise<Outcome> => "miss");
    await render(tryOnce);
    await advance(1999);
    expect(tryOnce).toHaveBeenCalledTimes(1);
    await advance(1); // 2 s after the first miss
    expect(tryOnce).toHaveBeenCalledTimes(2);
    await advance(3999);
    expect(tryOnce).toHaveBeenCalledTimes(2);
    await advance(1); // 4 s after the second
    expect(tryOnce).toHaveBeenCalledTimes(3);
  });

  it("does not poll while disabled, and starts at once when enabled", async () => {
    const tryOnce = vi.fn(async (): Promise<Outcome> => "hit");
    await render(tryOnce, { enabled: false });
    await advance(10_000);
    expect(tryOnce).not.toHaveBeenCalled();
    await render(tryOnce, { enabled: true });
    expect(tryOnce).toHaveBeenCalledTimes(1);
    await render(tryOnce, { enabled: false });
    await advance(10_000);
    expect(tryOnce).toHaveBeenCalledTimes(1);
  });

  it("starts over when the restart key changes: the old loop aborted, a try at once, misses forgotten", async () => {
    const signals: AbortSignal[] = [];
    const tryOnce = vi.fn(async (s: AbortSignal, n: number): Promise<Outcome> => (signals.push(s), n < 3 ? "miss" : "hit"));
    await render(tryOnce, { restartKey: "a" });
    await advance(6000); // misses at 0, 2 s, 6 s: the next wait is 8 s
    expect(tryOnce).toHaveBeenCalledTimes(3);
    await render(tryOnce, { restartKey: "b" });
    expect(tryOnce).toHaveBeenCalledTimes(4);
    expect(tryOnce.mock.calls[3][1]).toBe(0);
    expect(signals[0].aborted).toBe(true);
    expect(signals[3].aborted).toBe(false);
    await advance(2000); // the new loop's first miss waits 2 s, not 16
    expect(tryOnce).toHaveBeenCalledTimes(5);
  });

  it("calls the latest try without restarting when only the try changes", async () => {
    const first = vi.fn(async (): Promise<Outcome> => "hit");
    const second = vi.fn(async (): Promise<Outcome> => "hit");
    await render(first);
    await render(second);
    expect(first).toHaveBeenCalledTimes(1);
    expect(second).not.toHaveBeenCalled();
    await advance(1000);
    expect(first).toHaveBeenCalledTimes(1);
    expect(second).toHaveBeenCalledTimes(1);
  });
});
