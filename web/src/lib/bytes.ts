// Compact feed decoding: base64 to bytes, bitmaps, little-endian uint32.

export function base64ToBytes(b64: string): Uint8Array {
  if (!b64) return new Uint8Array(0);
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function bytesToBase64(bytes: Uint8Array): string {
  let s = "";
  const CH = 0x8000;
  for (let i = 0; i < bytes.length; i += CH) s += String.fromCharCode(...bytes.subarray(i, i + CH));
  return btoa(s);
}

/** Bit i of an LSB-first bitmap. */
export function bitSet(bitmap: Uint8Array, i: number): boolean {
  const b = bitmap[i >> 3];
  return b !== undefined && ((b >> (i & 7)) & 1) === 1;
}

/** Little-endian uint32 view of bytes (copied when unaligned or too short for whole words). */
export function u32le(bytes: Uint8Array): Uint32Array {
  const n = bytes.length >> 2;
  const out = new Uint32Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, n * 4);
  for (let i = 0; i < n; i++) out[i] = dv.getUint32(i * 4, true);
  return out;
}
