// Co-routing measured in the client, for servers without /experts/coroute:
// experts lit in the same hits frame fired for the same tokens. Only pairs in
// the same or neighbouring layers count (the server's definition too), which
// keeps a frame's pairs proportional to the experts lit, not its square.
import type { CoGraph } from "../../api/feeds";

export class CoFire {
  readonly rows: number;
  readonly cols: number;
  readonly n: number;
  private pairs = new Map<number, number>();
  frames = 0;

  constructor(rows: number, cols: number) {
    this.rows = rows;
    this.cols = cols;
    this.n = rows * cols;
  }

  /** Adds one frame: the indices of the experts lit in it. */
  add(lit: readonly number[]): void {
    if (lit.length < 2) return;
    this.frames++;
    const byRow = new Map<number, number[]>();
    for (const i of lit) {
      const r = Math.floor(i / this.cols);
      const a = byRow.get(r);
      if (a) a.push(i);
      else byRow.set(r, [i]);
    }
    for (const [r, here] of byRow) {
      const next = byRow.get(r + 1) ?? [];
      for (let x = 0; x < here.length; x++) {
        for (let y = x + 1; y < here.length; y++) this.bump(here[x], here[y]);
        for (const j of next) this.bump(here[x], j);
      }
    }
  }

  private bump(a: number, b: number) {
    const key = a < b ? a * this.n + b : b * this.n + a;
    this.pairs.set(key, (this.pairs.get(key) ?? 0) + 1);
  }

  get pairCount(): number {
    return this.pairs.size;
  }

  /** The k strongest partners of every expert, as the coroute feed gives them. */
  graph(k = 8): CoGraph {
    const lists: [number, number][][] = Array.from({ length: this.n }, () => []);
    for (const [key, c] of this.pairs) {
      const a = Math.floor(key / this.n);
      const b = key - a * this.n;
      lists[a].push([b, c]);
      lists[b].push([a, c]);
    }
    const nbr = new Uint32Array(this.n * k).fill(0xffffffff);
    const w = new Float32Array(this.n * k);
    lists.forEach((l, i) => {
      l.sort((p, q) => q[1] - p[1] || p[0] - q[0]);
      for (let s = 0; s < Math.min(k, l.length); s++) {
        nbr[i * k + s] = l[s][0];
        w[i * k + s] = l[s][1];
      }
    });
    return { n: this.n, k, nbr, w };
  }
}

/** Indices of the set bits of an LSB-first bitmap, below n. */
export function litIndices(bitmap: Uint8Array, n: number): number[] {
  const out: number[] = [];
  for (let byte = 0; byte < bitmap.length; byte++) {
    const b = bitmap[byte];
    if (!b) continue;
    for (let bit = 0; bit < 8; bit++) if ((b >> bit) & 1) {
      const i = (byte << 3) | bit;
      if (i < n) out.push(i);
    }
  }
  return out;
}
