import { describe, expect, it } from "vitest";
import { CoFire, litIndices } from "./cofire";

describe("client-side co-firing", () => {
  it("lists set bits below n", () => {
    expect(litIndices(new Uint8Array([0b1001, 0b10]), 10)).toEqual([0, 3, 9]);
    expect(litIndices(new Uint8Array([0xff]), 3)).toEqual([0, 1, 2]);
  });

  it("counts pairs in the same and the next layer only, and builds top-k partners", () => {
    const c = new CoFire(3, 4); // 3 layers × 4 experts
    c.add([0, 1, 5, 9]); // layer 0: 0,1; layer 1: 5; layer 2: 9
    c.add([0, 1]);
    expect(c.frames).toBe(2);
    const g = c.graph(3);
    const partners = (i: number) => Array.from(g.nbr.subarray(i * 3, i * 3 + 3)).filter((j) => j !== 0xffffffff);
    expect(partners(0)).toEqual([1, 5]); // 0–1 twice, 0–5 once; not 9 (two layers away)
    expect(g.w[0]).toBe(2);
    expect(partners(9)).toEqual([5]);
  });

  it("a frame with one expert adds nothing", () => {
    const c = new CoFire(1, 4);
    c.add([2]);
    expect(c.frames).toBe(0);
    expect(c.pairCount).toBe(0);
  });
});
