// Brain's live routing cells: colour = tier, brightness = heat, and a white
// flash for experts routed in the latest step that decays ×0.94 per frame
// (docs/dashboard-feeds.md#experts). Pure: the canvas only copies `pixels` to the screen.

import { bitSet } from "../../lib/bytes";

export const FLASH_DECAY = 0.94;
/** Flashes below this are dropped (and the animation may stop). */
export const FLASH_FLOOR = 0.02;

/** RGB per tier code: disk, RAM, VRAM (docs/dashboard-feeds.md#experts), pinned. */
export const TIER_RGB: readonly (readonly [number, number, number])[] = [
  [58, 71, 80],
  [90, 155, 216],
  [78, 214, 165],
  [236, 178, 92],
];

export function tierOf(byte: number): number {
  return (byte >> 6) & 3;
}
export function heatOf(byte: number): number {
  return byte & 63;
}

/** Brightness of a cell at heat bucket h: 0.35 + 0.65·min(h/24, 1). */
export function brightness(heat: number): number {
  return 0.35 + 0.65 * Math.min(heat / 24, 1);
}

/** Sets the flash of every cell whose hits bit is set to 1. */
export function flashHits(flash: Float32Array, hits: Uint8Array): number {
  let n = 0;
  for (let byte = 0; byte < hits.length; byte++) {
    const b = hits[byte];
    if (!b) continue;
    for (let bit = 0; bit < 8; bit++) {
      const i = (byte << 3) | bit;
      if (i >= flash.length) break;
      if (bitSet(hits, i)) {
        flash[i] = 1;
        n++;
      }
    }
  }
  return n;
}

/** One frame of decay; returns whether any flash is still visible. */
export function decayFlash(flash: Float32Array, factor = FLASH_DECAY): boolean {
  let alive = false;
  for (let i = 0; i < flash.length; i++) {
    const f = flash[i];
    if (f === 0) continue;
    const g = f * factor;
    if (g < FLASH_FLOOR) flash[i] = 0;
    else {
      flash[i] = g;
      alive = true;
    }
  }
  return alive;
}

/** Flash left after `frames` frames: factor^frames. */
export function flashAfter(frames: number, factor = FLASH_DECAY): number {
  return Math.pow(factor, frames);
}

/** RGB of one cell. */
export function cellRGB(byte: number, flash: number): [number, number, number] {
  const [r, g, b] = TIER_RGB[tierOf(byte)];
  const k = brightness(heatOf(byte));
  const f = Math.min(1, Math.max(0, flash));
  return [
    Math.round(r * k + (255 - r * k) * f),
    Math.round(g * k + (255 - g * k) * f),
    Math.round(b * k + (255 - b * k) * f),
  ];
}

/** Base colour of every map byte (tier colour × heat brightness), 256 × RGB. */
const BASE_LUT: Uint8Array = (() => {
  const lut = new Uint8Array(256 * 3);
  for (let byte = 0; byte < 256; byte++) {
    const [r, g, b] = TIER_RGB[tierOf(byte)];
    const k = brightness(heatOf(byte));
    lut[byte * 3] = Math.round(r * k);
    lut[byte * 3 + 1] = Math.round(g * k);
    lut[byte * 3 + 2] = Math.round(b * k);
  }
  return lut;
})();

/** Writes every cell's colour into RGBA pixels (one pixel per cell); no allocation per cell. */
export function paintCells(pixels: Uint8ClampedArray, map: Uint8Array, flash: Float32Array): void {
  const n = Math.min(map.length, pixels.length >> 2);
  for (let i = 0; i < n; i++) {
    const l = map[i] * 3;
    const f = flash[i] ?? 0;
    const r = BASE_LUT[l];
    const g = BASE_LUT[l + 1];
    const b = BASE_LUT[l + 2];
    const o = i << 2;
    pixels[o] = r + (255 - r) * f;
    pixels[o + 1] = g + (255 - g) * f;
    pixels[o + 2] = b + (255 - b) * f;
    pixels[o + 3] = 255;
  }
}

/** Experts per tier in a map. */
export function tierCounts(map: Uint8Array): [number, number, number, number] {
  const c: [number, number, number, number] = [0, 0, 0, 0];
  for (let i = 0; i < map.length; i++) c[tierOf(map[i])]++;
  return c;
}
