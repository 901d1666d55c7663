import { describe, expect, it } from "vitest";
import { brightness, cellRGB, decayFlash, FLASH_DECAY, FLASH_FLOOR, flashAfter, flashHits, heatOf, paintCells, tierCounts, tierOf, TIER_RGB } from "./heat";

describe("heat and flashes", () => {
  it("splits a map byte into tier and heat", () => {
    const byte = (2 << 6) | 17;
    expect(tierOf(byte)).toBe(2);
    expect(heatOf(byte)).toBe(17);
  });

  it("brightness is 0.35 + 0.65·min(heat/24, 1)", () => {
    expect(brightness(0)).toBeCloseTo(0.35);
    expect(brightness(12)).toBeCloseTo(0.675);
    expect(brightness(24)).toBeCloseTo(1);
    expect(brightness(63)).toBeCloseTo(1);
  });

  it("colours by tier (the documented RGB) and flashes toward white", () => {
    expect(cellRGB((1 << 6) | 24, 0)).toEqual([...TIER_RGB[1]]);
    expect(cellRGB((0 << 6) | 24, 1)).toEqual([255, 255, 255]);
    const [r] = cellRGB(0, 0.5);
    expect(r).toBe(Math.round(58 * 0.35 + (255 - 58 * 0.35) * 0.5));
  });

  it("sets flashes from an LSB-first bitmap", () => {
    const flash = new Float32Array(12);
    const n = flashHits(flash, new Uint8Array([0b00000101, 0b00001000]));
    expect(n).toBe(3);
    expect([...flash].map((f, i) => (f ? i : -1)).filter((i) => i >= 0)).toEqual([0, 2, 11]);
  });

  it("ignores bits past the last cell", () => {
    const flash = new Float32Array(3);
    expect(flashHits(flash, new Uint8Array([0xff]))).toBe(3);
  });

  it("decays ×0.94 per frame and drops below the floor", () => {
    const flash = new Float32Array([1, 0, FLASH_FLOOR * 1.01]);
    expect(decayFlash(flash)).toBe(true);
    expect(flash[0]).toBeCloseTo(FLASH_DECAY);
    expect(flash[1]).toBe(0);
    expect(flash[2]).toBe(0); // 0.0202·0.94 < floor
    let frames = 0;
    while (decayFlash(flash)) frames++;
    // gone after about ln(floor)/ln(0.94) ≈ 63 frames, about a second at 60 fps
    const expected = Math.log(FLASH_FLOOR) / Math.log(FLASH_DECAY);
    expect(Math.abs(frames + 2 - expected)).toBeLessThanOrEqual(1.5);
    expect(flashAfter(10)).toBeCloseTo(0.94 ** 10);
  });

  it("paints every cell, matching cellRGB within rounding", () => {
    const map = new Uint8Array([0, (1 << 6) | 5, (2 << 6) | 30, (3 << 6) | 12]);
    const flash = new Float32Array([0, 0.3, 1, 0.7]);
    const px = new Uint8ClampedArray(16);
    paintCells(px, map, flash);
    for (let i = 0; i < 4; i++) {
      const want = cellRGB(map[i], flash[i]);
      for (let c = 0; c < 3; c++) expect(Math.abs(px[i * 4 + c] - want[c])).toBeLessThanOrEqual(1);
      expect(px[i * 4 + 3]).toBe(255);
    }
    expect(tierCounts(map)).toEqual([1, 1, 1, 1]);
  });
});
