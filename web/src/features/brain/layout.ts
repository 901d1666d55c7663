// Brain › Explore: a cortex-like 2-D map of the experts, derived from
// measured co-routing — experts that fire together sit together. Pure and
// deterministic (no Math.random), linear-ish in the number of edges, so it
// lays out 100k experts in a second or two.
//
// 1. A symmetric weighted graph from each expert's k strongest partners.
// 2. Regions: label propagation (each expert takes the label its partners
//    weigh most), then small regions merge into their best-connected
//    neighbour, up to `maxRegions`. Experts with no partner form one quiet
//    region.
// 3. Regions as discs (area ∝ experts) placed by a small force layout over
//    the region graph: strongly co-routed regions touch, discs never overlap.
// 4. Inside each disc, experts take the slots of a sunflower pattern; a few
//    rounds move each expert toward the mean of its partners (also those in
//    other regions, so border experts face the region they talk to) and
//    re-assign slots by recursive bisection, which keeps neighbours close.

import type { CoGraph } from "../../api/feeds";

export interface Region {
  id: number;
  /** Experts in the region. */
  size: number;
  /** Centre in [0,1]² of the drawing box; radius as a fraction of the box height. */
  x: number;
  y: number;
  r: number;
  /** True for the region of experts with no measured partner. */
  quiet: boolean;
}

export interface Layout {
  /** Width ÷ height the layout was made for. */
  aspect: number;
  /** Per expert, in [0,1] of the box width (x) and height (y). */
  x: Float32Array;
  y: Float32Array;
  /** Per expert: index into `regions`. */
  region: Int32Array;
  regions: Region[];
}

export interface LayoutOptions {
  maxRegions?: number;
  /** Regions smaller than this merge into a neighbour (default max(3, n/300)). */
  minRegion?: number;
  /** Rounds of partner smoothing inside regions. */
  rounds?: number;
  /** Width ÷ height of the box the map is drawn in (default 1): the map spreads to fill it. */
  aspect?: number;
}

interface Csr {
  start: Int32Array;
  to: Int32Array;
  wt: Float32Array;
}

/** Symmetric CSR adjacency; self-loops and padding dropped. */
export function buildGraph(g: CoGraph): Csr {
  const { n, k, nbr, w } = g;
  const deg = new Int32Array(n + 1);
  const valid = (i: number, s: number) => {
    const j = nbr[i * k + s];
    return j < n && j !== i && w[i * k + s] > 0;
  };
  for (let i = 0; i < n; i++)
    for (let s = 0; s < k; s++)
      if (valid(i, s)) {
        deg[i]++;
        deg[nbr[i * k + s]]++;
      }
  const start = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) start[i + 1] = start[i] + deg[i];
  const fill = start.slice(0, n);
  const to = new Int32Array(start[n]);
  const wt = new Float32Array(start[n]);
  for (let i = 0; i < n; i++)
    for (let s = 0; s < k; s++)
      if (valid(i, s)) {
        const j = nbr[i * k + s];
        const v = w[i * k + s];
        to[fill[i]] = j;
        wt[fill[i]++] = v;
        to[fill[j]] = i;
        wt[fill[j]++] = v;
      }
  return { start, to, wt };
}

/** A small deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Label propagation; -1 for experts without partners. Labels are not compacted. */
export function communities(csr: Csr, n: number, passes = 24): Int32Array {
  const label = new Int32Array(n);
  for (let i = 0; i < n; i++) label[i] = csr.start[i + 1] > csr.start[i] ? i : -1;
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  const rand = rng(0x5eed);
  const score = new Map<number, number>();
  for (let pass = 0; pass < passes; pass++) {
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      const t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    let changed = 0;
    for (let oi = 0; oi < n; oi++) {
      const i = order[oi];
      const a = csr.start[i];
      const b = csr.start[i + 1];
      if (a === b) continue;
      score.clear();
      for (let e = a; e < b; e++) {
        const l = label[csr.to[e]];
        score.set(l, (score.get(l) ?? 0) + csr.wt[e]);
      }
      let best = label[i];
      let bestScore = score.get(best) ?? 0;
      for (const [l, s] of score)
        if (s > bestScore + 1e-9) {
          best = l;
          bestScore = s;
        }
      if (best !== label[i]) {
        label[i] = best;
        changed++;
      }
    }
    if (changed === 0) break;
  }
  return label;
}

/** Compacts labels to 0..m-1 (largest first), merges small regions; quiet experts get the last id. */
function regionsOf(csr: Csr, label: Int32Array, n: number, minRegion: number, maxRegions: number) {
  const idOf = new Map<number, number>();
  const members: number[][] = [];
  const reg = new Int32Array(n).fill(-1);
  for (let i = 0; i < n; i++) {
    const l = label[i];
    if (l < 0) continue;
    let id = idOf.get(l);
    if (id === undefined) {
      id = members.length;
      idOf.set(l, id);
      members.push([]);
    }
    members[id].push(i);
    reg[i] = id;
  }
  const parent = members.map((_, i) => i);
  const find = (a: number): number => {
    while (parent[a] !== a) a = parent[a] = parent[parent[a]];
    return a;
  };
  /** The region `id` is most linked to (by total partner strength), or -1. */
  const bestNeighbour = (id: number): number => {
    const link = new Map<number, number>();
    for (const i of members[id])
      for (let e = csr.start[i]; e < csr.start[i + 1]; e++) {
        const r = find(reg[csr.to[e]]);
        if (r !== id) link.set(r, (link.get(r) ?? 0) + csr.wt[e]);
      }
    let target = -1;
    let tw = 0;
    for (const [r, v] of link) if (v > tw || (v === tw && r < target)) [target, tw] = [r, v];
    return target;
  };
  const merge = (from: number, into: number) => {
    parent[from] = into;
    for (const i of members[from]) members[into].push(i);
    members[from] = [];
  };
  // Small regions join their best-connected neighbour, smallest first, until none is left to merge.
  for (let changed = true; changed; ) {
    changed = false;
    const order = members.map((_, id) => id).filter((id) => find(id) === id);
    order.sort((p, q) => members[p].length - members[q].length || p - q);
    for (const id of order) {
      if (find(id) !== id || members[id].length >= minRegion) continue;
      const t = bestNeighbour(id);
      if (t >= 0) {
        merge(id, t);
        changed = true;
      }
    }
  }
  // Too many regions: merge the smallest into its best neighbour (or the smallest other).
  for (;;) {
    const live = members.map((_, id) => id).filter((id) => find(id) === id);
    if (live.length <= maxRegions) break;
    live.sort((p, q) => members[p].length - members[q].length || p - q);
    const small = live[0];
    const t = bestNeighbour(small);
    merge(small, t >= 0 ? t : live[1]);
  }
  // Final ids: largest first; quiet experts last.
  const roots = members.map((_, id) => id).filter((id) => find(id) === id);
  roots.sort((p, q) => members[q].length - members[p].length || p - q);
  const out = new Int32Array(n).fill(roots.length);
  roots.forEach((r, idx) => {
    for (const i of members[r]) out[i] = idx;
  });
  let quiet = 0;
  for (let i = 0; i < n; i++) if (reg[i] < 0) quiet++;
  return { region: out, count: roots.length, quiet };
}

/** Places region discs: connected regions attract, all repel, discs never overlap. */
function placeRegions(sizes: number[], links: Map<number, number>[], quietId: number, aspect: number): { x: number; y: number; r: number }[] {
  const m = sizes.length;
  const r = sizes.map((s) => Math.sqrt(Math.max(1, s)));
  const golden = Math.PI * (3 - Math.sqrt(5));
  const pos = sizes.map((_, i) => {
    const rad = Math.sqrt(i + 0.5) * (r[0] ?? 1) * 1.3;
    return { x: Math.cos(i * golden) * rad, y: Math.sin(i * golden) * rad };
  });
  let maxLink = 0;
  for (const l of links) for (const v of l.values()) maxLink = Math.max(maxLink, v);
  const iters = m > 1 ? 400 : 0;
  for (let it = 0; it < iters; it++) {
    const cool = 1 - it / iters;
    const dx = new Float64Array(m);
    const dy = new Float64Array(m);
    for (let a = 0; a < m; a++) {
      for (let b = a + 1; b < m; b++) {
        let vx = pos[b].x - pos[a].x;
        let vy = pos[b].y - pos[a].y;
        let d = Math.hypot(vx, vy);
        if (d < 1e-6) {
          vx = 1e-3 * (b - a);
          vy = 1e-3;
          d = Math.hypot(vx, vy);
        }
        const ux = vx / d;
        const uy = vy / d;
        const rest = (r[a] + r[b]) * 1.12;
        const wab = (links[a].get(b) ?? 0) / (maxLink || 1);
        // Attraction toward touching for linked regions, mild repulsion otherwise.
        let f = wab > 0 ? wab * (d - rest) * 0.5 : -Math.min(rest * rest / (d * d), 4) * 0.15 * rest;
        if (a === quietId || b === quietId) f = 0; // the quiet region is placed afterwards, at the edge
        dx[a] += ux * f;
        dy[a] += uy * f;
        dx[b] -= ux * f;
        dy[b] -= uy * f;
      }
      // Gravity toward the centre keeps the map compact (and as wide as the box).
      dx[a] -= (pos[a].x * 0.02) / aspect;
      dy[a] -= pos[a].y * 0.02 * aspect;
    }
    for (let a = 0; a < m; a++) {
      const step = 0.15 * cool + 0.02;
      pos[a].x += dx[a] * step;
      pos[a].y += dy[a] * step;
    }
    // Resolve overlaps exactly.
    for (let rep = 0; rep < 3; rep++)
      for (let a = 0; a < m; a++)
        for (let b = a + 1; b < m; b++) {
          const vx = pos[b].x - pos[a].x;
          const vy = pos[b].y - pos[a].y;
          const d = Math.hypot(vx, vy) || 1e-6;
          const min = (r[a] + r[b]) * 1.06;
          if (d < min) {
            const push = (min - d) / 2;
            const ux = vx / d;
            const uy = vy / d;
            pos[a].x -= ux * push;
            pos[a].y -= uy * push;
            pos[b].x += ux * push;
            pos[b].y += uy * push;
          }
        }
  }
  // The quiet region (experts with no measured partner) rests at the right edge.
  if (quietId >= 0 && m > 1) {
    let hi = -Infinity;
    let sy = 0;
    for (let a = 0; a < m; a++)
      if (a !== quietId) {
        hi = Math.max(hi, pos[a].x + r[a]);
        sy += pos[a].y / (m - 1);
      }
    pos[quietId].x = hi + r[quietId] * 1.1;
    pos[quietId].y = sy;
  }
  // Spread sideways to the box's shape: moving centres apart along x keeps
  // every neighbourhood (left stays left) and cannot create an overlap.
  if (m > 1) {
    let lo = Infinity;
    let hi = -Infinity;
    let top = Infinity;
    let bottom = -Infinity;
    let mean = 0;
    for (let a = 0; a < m; a++) {
      lo = Math.min(lo, pos[a].x - r[a]);
      hi = Math.max(hi, pos[a].x + r[a]);
      top = Math.min(top, pos[a].y - r[a]);
      bottom = Math.max(bottom, pos[a].y + r[a]);
      mean += pos[a].x / m;
    }
    const f = Math.max(1, Math.min(1.7, (aspect * (bottom - top)) / Math.max(1e-9, hi - lo)));
    for (const p of pos) p.x = mean + (p.x - mean) * f;
  }
  // Finally, no two discs overlap at all.
  for (let rep = 0; rep < 200; rep++) {
    let moved = false;
    for (let a = 0; a < m; a++)
      for (let b = a + 1; b < m; b++) {
        const vx = pos[b].x - pos[a].x;
        const vy = pos[b].y - pos[a].y;
        const d = Math.hypot(vx, vy) || 1e-6;
        const min = (r[a] + r[b]) * 1.04;
        if (d < min) {
          const push = (min - d) / 2 + 1e-9;
          pos[a].x -= (vx / d) * push;
          pos[a].y -= (vy / d) * push;
          pos[b].x += (vx / d) * push;
          pos[b].y += (vy / d) * push;
          moved = true;
        }
      }
    if (!moved) break;
  }
  return pos.map((p, i) => ({ x: p.x, y: p.y, r: r[i] }));
}

/** Assigns items to slots keeping locality: split both by x (then y) at the same count, recurse. */
export function bisectAssign(tx: Float64Array, ty: Float64Array, sx: Float64Array, sy: Float64Array): Int32Array {
  const m = tx.length;
  const out = new Int32Array(m);
  const items = Array.from({ length: m }, (_, i) => i);
  const slots = Array.from({ length: m }, (_, i) => i);
  const rec = (it: number[], sl: number[], axis: number) => {
    if (it.length === 0) return;
    if (it.length === 1) {
      out[it[0]] = sl[0];
      return;
    }
    const key = axis === 0 ? tx : ty;
    const skey = axis === 0 ? sx : sy;
    it.sort((a, b) => key[a] - key[b] || a - b);
    sl.sort((a, b) => skey[a] - skey[b] || a - b);
    const h = it.length >> 1;
    rec(it.slice(0, h), sl.slice(0, h), 1 - axis);
    rec(it.slice(h), sl.slice(h), 1 - axis);
  };
  rec(items, slots, 0);
  return out;
}

export function layoutExperts(g: CoGraph, opts: LayoutOptions = {}): Layout {
  const n = g.n;
  const maxRegions = opts.maxRegions ?? 24;
  const aspect = Math.max(0.4, Math.min(3, opts.aspect ?? 1));
  const minRegion = opts.minRegion ?? Math.max(3, Math.floor(n / 300));
  const rounds = opts.rounds ?? 4;
  const csr = buildGraph(g);
  const label = communities(csr, n);
  const { region, count, quiet } = regionsOf(csr, label, n, minRegion, maxRegions);
  const m = count + (quiet > 0 ? 1 : 0);
  const quietId = quiet > 0 ? count : -1;

  const sizes = new Array<number>(m).fill(0);
  for (let i = 0; i < n; i++) sizes[region[i]]++;
  const links = Array.from({ length: m }, () => new Map<number, number>());
  for (let i = 0; i < n; i++)
    for (let e = csr.start[i]; e < csr.start[i + 1]; e++) {
      const a = region[i];
      const b = region[csr.to[e]];
      if (a !== b) links[a].set(b, (links[a].get(b) ?? 0) + csr.wt[e]);
    }
  const discs = placeRegions(sizes, links, quietId, aspect);

  // Members of each region, and their sunflower slots.
  const byRegion: number[][] = Array.from({ length: m }, () => []);
  for (let i = 0; i < n; i++) byRegion[region[i]].push(i);
  const x = new Float64Array(n);
  const y = new Float64Array(n);
  const golden = Math.PI * (3 - Math.sqrt(5));
  const slotX: Float64Array[] = [];
  const slotY: Float64Array[] = [];
  byRegion.forEach((ms, rid) => {
    const c = ms.length;
    const sx = new Float64Array(c);
    const sy = new Float64Array(c);
    const d = discs[rid];
    for (let j = 0; j < c; j++) {
      const rad = d.r * Math.sqrt((j + 0.5) / c);
      sx[j] = d.x + Math.cos(j * golden) * rad;
      sy[j] = d.y + Math.sin(j * golden) * rad;
    }
    slotX.push(sx);
    slotY.push(sy);
    // Start: slots in member order (layer-major), a reasonable first guess.
    ms.forEach((i, j) => {
      x[i] = sx[j];
      y[i] = sy[j];
    });
  });

  // Rounds: target = halfway to the mean of partners; re-assign slots by bisection.
  for (let round = 0; round < rounds; round++) {
    const tx = new Float64Array(n);
    const ty = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      let sw = 0;
      let mx = 0;
      let my = 0;
      for (let e = csr.start[i]; e < csr.start[i + 1]; e++) {
        const j = csr.to[e];
        mx += x[j] * csr.wt[e];
        my += y[j] * csr.wt[e];
        sw += csr.wt[e];
      }
      tx[i] = sw > 0 ? 0.35 * x[i] + 0.65 * (mx / sw) : x[i];
      ty[i] = sw > 0 ? 0.35 * y[i] + 0.65 * (my / sw) : y[i];
    }
    byRegion.forEach((ms, rid) => {
      if (ms.length < 2) return;
      const mtx = Float64Array.from(ms, (i) => tx[i]);
      const mty = Float64Array.from(ms, (i) => ty[i]);
      const assign = bisectAssign(mtx, mty, slotX[rid], slotY[rid]);
      ms.forEach((i, j) => {
        x[i] = slotX[rid][assign[j]];
        y[i] = slotY[rid][assign[j]];
      });
    });
  }

  // Normalise into the box: x in [0,1] of its width, y of its height, one
  // scale for both (circles stay round), centred.
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  for (const d of discs) {
    minX = Math.min(minX, d.x - d.r);
    maxX = Math.max(maxX, d.x + d.r);
    minY = Math.min(minY, d.y - d.r);
    maxY = Math.max(maxY, d.y + d.r);
  }
  if (!Number.isFinite(minX)) {
    minX = minY = 0;
    maxX = maxY = 1;
  }
  const h = Math.max((maxX - minX) / aspect, maxY - minY) || 1;
  const w = h * aspect;
  const offX = (w - (maxX - minX)) / 2;
  const offY = (h - (maxY - minY)) / 2;
  const nx = (v: number) => (v - minX + offX) / w;
  const ny = (v: number) => (v - minY + offY) / h;
  const outX = new Float32Array(n);
  const outY = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    outX[i] = nx(x[i]);
    outY[i] = ny(y[i]);
  }
  const regions: Region[] = discs.map((d, id) => ({
    id,
    size: sizes[id],
    x: nx(d.x),
    y: ny(d.y),
    r: d.r / h,
    quiet: id === quietId,
  }));
  return { aspect, x: outX, y: outY, region, regions };
}
