import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { backoffDelay, startPoll, type Backoff, type Outcome } from "./poll";

const FEED: Backoff = { maxMs: 30_000, maxDoublings: 4 };

/** A try that answers with the outcomes given, in turn, and notes when (ms since start) it was asked. */
function scripted(outcomes: Outcome[]) {
  const t0 = Date.now();
  const at: number[] = [];
  const tryOnce = vi.fn(async () => {
    at.push(Date.now() - t0);
    return outcomes[at.length - 1] ?? "hit";
  });
  return { tryOnce, at };
}

describe("backoffDelay", () => {
  const waits = (interval: number, b: Backoff, upTo: number) => Array.from({ length: upTo + 1 }, (_, m) => backoffDelay(interval, m, b));

  it("doubles per miss up to maxDoublings and maxMs (the feeds)", () => {
    expect(waits(1500, FEED, 6)).toEqual([1500, 3000, 6000, 12000, 24000, 24000, 24000]);
    expect(waits(2000, FEED, 6)).toEqual([2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });

  it("retries at the plain interval for graceMisses before doubling (/health: 5 → 10 → 20 → 30 s)", () => {
    expect(waits(5000, { maxMs: 30_000, graceMisses: 1 }, 6)).toEqual([5000, 5000, 10000, 20000, 30000, 30000, 30000]);
  });

  it("doubles without a count limit up to maxMs (the /events stream)", () => {
    expect(waits(5000, { maxMs: 60_000 }, 6)).toEqual([5000, 10000, 20000, 40000, 60000, 60000, 60000]);
    expect(backoffDelay(5000, 5000, { maxMs: 60_000 })).toBe(60000);
  });
});

describe("startPoll", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("tries at once, then once per interval while it is answered", async () => {
    const { tryOnce, at } = scripted([]);
    const stop = startPoll(tryOnce, 1000, FEED);
    expect(at).toEqual([0]);
    await vi.advanceTimersByTimeAsync(999);
    expect(at).toEqual([0]);
    await vi.advanceTimersByTimeAsync(1);
    expect(at).toEqual([0, 1000]);
    await vi.advanceTimersByTimeAsync(3000);
    expect(at).toEqual([0, 1000, 2000, 3000, 4000]);
    stop();
  });

  it("waits longer after each miss in a row, and a hit brings back the plain interval", async () => {
    const { tryOnce, at } = scripted(["miss", "miss", "miss", "hit", "miss"]);
    const stop = startPoll(tryOnce, 1000, FEED);
    await vi.advanceTimersByTimeAsync(20_000);
    // waits: 2 s, 4 s, 8 s after the misses; 1 s after the hit; 2 s after the next miss.
    expect(at.slice(0, 6)).toEqual([0, 2000, 6000, 14000, 15000, 17000]);
    stop();
  });

  it("holds the wait at maxMs however long nothing answers", async () => {
    const { tryOnce, at } = scripted(Array<Outcome>(20).fill("miss"));
    const stop = startPoll(tryOnce, 5000, { maxMs: 30_000, graceMisses: 1 });
    await vi.advanceTimersByTimeAsync(200_000);
    const gaps = at.slice(1).map((t, i) => t - at[i]);
    expect(gaps.slice(0, 7)).toEqual([5000, 10000, 20000, 30000, 30000, 30000, 30000]);
    stop();
  });

  it("counts an answer that broke off as the first miss after a hit", async () => {
    const { tryOnce, at } = scripted(["miss", "miss", "miss", "lost", "hit"]);
    const stop = startPoll(tryOnce, 5000, { maxMs: 60_000 });
    await vi.advanceTimersByTimeAsync(100_000);
    // 10, 20, 40 s after the misses; 10 s (not 80 s) after the stream that opened and broke off.
    expect(at.slice(0, 6)).toEqual([0, 10000, 30000, 70000, 80000, 85000]);
    stop();
  });

  it("asks no more after a stop outcome", async () => {
    const { tryOnce, at } = scripted(["hit", "stop"]);
    const stop = startPoll(tryOnce, 1000, FEED);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(at).toEqual([0, 1000]);
    stop();
  });

  it("numbers the tries of a loop from 0", async () => {
    const seen: number[] = [];
    const stop = startPoll(async (_signal, n) => (seen.push(n), "hit"), 1000, FEED);
    await vi.advanceTimersByTimeAsync(3000);
    expect(seen).toEqual([0, 1, 2, 3]);
    stop();
  });

  it("counts a try that throws as a miss", async () => {
    const tryOnce = vi.fn<() => Promise<Outcome>>().mockRejectedValueOnce(new Error("boom")).mockResolvedValue("hit");
    const stop = startPoll(tryOnce, 1000, FEED);
    await vi.advanceTimersByTimeAsync(1999);
    expect(tryOnce).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(tryOnce).toHaveBeenCalledTimes(2);
    stop();
  });

  it("never overlaps tries: the wait starts when a slow try ends", async () => {
    const at: number[] = [];
    const t0 = Date.now();
    const slow = vi.fn(async () => {
      at.push(Date.now() - t0);
      await new Promise((r) => setTimeout(r, 5000));
      return "hit" as const;
    });
    const stop = startPoll(slow, 1000, FEED);
    await vi.advanceTimersByTimeAsync(12_000);
    expect(at).toEqual([0, 6000, 12000]);
    stop();
  });

  it("stopping aborts the try in flight and schedules nothing more", async () => {
    let signal: AbortSignal | null = null;
    let release: (o: Outcome) => void = () => undefined;
    const tryOnce = vi.fn((s: AbortSignal) => {
      signal = s;
      return new Promise<Outcome>((r) => (release = r));
    });
    const stop = startPoll(tryOnce, 1000, FEED);
    expect(signal!.aborted).toBe(false);
    stop();
    expect(signal!.aborted).toBe(true);
    release("hit");
    await vi.advanceTimersByTimeAsync(60_000);
    expect(tryOnce).toHaveBeenCalledTimes(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("stopping between tries clears the timer", async () => {
    const { tryOnce } = scripted([]);
    const stop = startPoll(tryOnce, 1000, FEED);
    await vi.advanceTimersByTimeAsync(10);
    expect(vi.getTimerCount()).toBe(1);
    stop();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(tryOnce).toHaveBeenCalledTimes(1);
  });
});
