import { useEffect, useMemo, useRef, useState } from "react";
import type { ExpertsFrame } from "../../api/feeds";
import type { Layout } from "./layout";
import { cellRGB, decayFlash, flashHits, heatOf, tierOf } from "./heat";
import { fitCanvas, useSize } from "./canvas";
import { Tooltip, type HoverInfo } from "./Tooltip";

/** Region hues: calm, distinguishable, never the tier colours' saturation. */
function regionHue(id: number): number {
  return (id * 137.508 + 200) % 360;
}

export function ExploreMap({ layout, frame, counts }: { layout: Layout; frame: ExpertsFrame; counts: Uint32Array | null }) {
  const wrap = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const { w } = useSize(wrap);
  const W = Math.max(200, w);
  const H = W / layout.aspect;
  const flash = useRef(new Float32Array(0));
  const lastSeq = useRef<number | null>(null);
  const raf = useRef(0);
  const bg = useRef<HTMLCanvasElement | null>(null);
  const [hover, setHover] = useState<HoverInfo | null>(null);
  const n = layout.x.length;
  const dot = Math.max(1.2, Math.min(7, (Math.sqrt(W * H) / Math.sqrt(Math.max(1, n))) * 0.55));

  // Layer span of each region, for its label.
  const spans = useMemo(() => {
    const lo = layout.regions.map(() => Infinity);
    const hi = layout.regions.map(() => -Infinity);
    for (let i = 0; i < n; i++) {
      const r = layout.region[i];
      const row = Math.floor(i / frame.cols);
      const l = frame.layers[row] ?? row;
      lo[r] = Math.min(lo[r], l);
      hi[r] = Math.max(hi[r], l);
    }
    return lo.map((l, i) => [l, hi[i]] as const);
  }, [layout, frame.cols, frame.layers, n]);

  // A spatial index for hovering: a grid of buckets over [0,1]².
  const index = useMemo(() => {
    const G = Math.max(8, Math.min(256, Math.round(Math.sqrt(n / 4))));
    const buckets: number[][] = Array.from({ length: G * G }, () => []);
    for (let i = 0; i < n; i++) {
      const gx = Math.min(G - 1, Math.floor(layout.x[i] * G));
      const gy = Math.min(G - 1, Math.floor(layout.y[i] * G));
      buckets[gy * G + gx].push(i);
    }
    return { G, buckets };
  }, [layout, n]);

  const pad = 14;
  const iw = W - 2 * pad;
  const ih = H - 2 * pad;
  const px = (v: number) => pad + v * iw;
  const py = (v: number) => pad + v * ih;

  const draw = useRef<() => void>(() => {});
  draw.current = () => {
    const c = canvas.current;
    if (!c || w <= 0) return;
    const ctx = fitCanvas(c, W, H);
    if (!ctx) return;
    // Regions: soft discs, cached until the layout or size changes.
    const dpr = c.width / W;
    if (!bg.current || bg.current.width !== c.width) {
      const b = document.createElement("canvas");
      b.width = c.width;
      b.height = c.height;
      const g = b.getContext("2d")!;
      g.scale(dpr, dpr);
      // One soft tissue under all regions: wide, faint radial glows that merge.
      for (const r of layout.regions) {
        const cx = px(r.x);
        const cy = py(r.y);
        const rad = r.r * ih * 1.9 + dot * 4;
        const glow = g.createRadialGradient(cx, cy, 0, cx, cy, rad);
        glow.addColorStop(0, "rgba(110, 150, 165, 0.13)");
        glow.addColorStop(0.6, "rgba(110, 150, 165, 0.07)");
        glow.addColorStop(1, "rgba(110, 150, 165, 0)");
        g.fillStyle = glow;
        g.beginPath();
        g.arc(cx, cy, rad, 0, Math.PI * 2);
        g.fill();
      }
      // Fade the tissue out toward the canvas edges, so no glow ends in a straight cut.
      g.globalCompositeOperation = "destination-in";
      const fade = Math.min(48, W * 0.06, H * 0.08);
      for (const [x0, y0, x1, y1, len] of [[0, 0, W, 0, W], [0, 0, 0, H, H]] as const) {
        const lin = g.createLinearGradient(x0, y0, x1, y1);
        lin.addColorStop(0, "rgba(0,0,0,0)");
        lin.addColorStop(fade / len, "rgba(0,0,0,1)");
        lin.addColorStop(1 - fade / len, "rgba(0,0,0,1)");
        lin.addColorStop(1, "rgba(0,0,0,0)");
        g.fillStyle = lin;
        g.fillRect(0, 0, W, H);
      }
      g.globalCompositeOperation = "source-over";
      for (const r of layout.regions) {
        const cx = px(r.x);
        const cy = py(r.y);
        const rad = r.r * ih * 1.02 + dot;
        const hue = regionHue(r.id);
        const grad = g.createRadialGradient(cx, cy, rad * 0.15, cx, cy, rad * 1.08);
        grad.addColorStop(0, r.quiet ? "hsla(210, 8%, 50%, 0.08)" : `hsla(${hue}, 48%, 55%, 0.30)`);
        grad.addColorStop(0.85, r.quiet ? "hsla(210, 8%, 50%, 0.05)" : `hsla(${hue}, 48%, 55%, 0.14)`);
        grad.addColorStop(1, "hsla(0, 0%, 0%, 0)");
        g.fillStyle = grad;
        g.beginPath();
        g.arc(cx, cy, rad * 1.08, 0, Math.PI * 2);
        g.fill();
        if (r.quiet) {
          g.strokeStyle = "hsla(210, 8%, 60%, 0.22)";
          g.setLineDash([3, 4]);
          g.beginPath();
          g.arc(cx, cy, rad, 0, Math.PI * 2);
          g.stroke();
          g.setLineDash([]);
        }
      }
      bg.current = b;
    }
    ctx.clearRect(0, 0, W, H);
    ctx.drawImage(bg.current, 0, 0, W, H);
    const f = flash.current;
    for (let i = 0; i < n; i++) {
      const byte = frame.map[i] ?? 0;
      const [r, g, b] = cellRGB(byte, f[i] ?? 0);
      ctx.fillStyle = `rgb(${r},${g},${b})`;
      const s = dot * (0.75 + 0.25 * Math.min(1, heatOf(byte) / 24)) + (f[i] ?? 0) * dot * 0.6;
      ctx.fillRect(px(layout.x[i]) - s / 2, py(layout.y[i]) - s / 2, s, s);
    }
    // Labels of the larger regions, never on top of each other.
    ctx.font = "500 11px system-ui, sans-serif";
    ctx.textAlign = "center";
    const placed: [number, number, number, number][] = [];
    for (const r of layout.regions) {
      if (r.r * ih < 26 || placed.length >= 12) continue;
      const [lo, hi] = spans[r.id] ?? [0, 0];
      const label = r.quiet ? "quiet" : `R${r.id + 1} · ${lo === hi ? `layer ${lo}` : `layers ${lo}–${hi}`}`;
      const tw = ctx.measureText(label).width + 10;
      const lx = px(r.x);
      const ly = Math.max(12, py(r.y) - r.r * ih - 6);
      const box: [number, number, number, number] = [lx - tw / 2, ly - 11, lx + tw / 2, ly + 3];
      if (placed.some((b) => box[0] < b[2] && box[2] > b[0] && box[1] < b[3] && box[3] > b[1])) continue;
      placed.push(box);
      ctx.fillStyle = "rgba(10, 15, 17, 0.55)";
      ctx.fillRect(box[0], box[1], tw, 15);
      ctx.fillStyle = "rgba(220, 232, 236, 0.85)";
      ctx.fillText(label, lx, ly);
    }
    const alive = decayFlash(f);
    cancelAnimationFrame(raf.current);
    if (alive) raf.current = requestAnimationFrame(() => draw.current());
  };

  useEffect(() => {
    bg.current = null;
  }, [layout, W]);

  useEffect(() => {
    if (flash.current.length !== n) {
      flash.current = new Float32Array(n);
      lastSeq.current = null;
    }
    if (lastSeq.current !== null && frame.seq !== lastSeq.current) flashHits(flash.current, frame.hits);
    lastSeq.current = frame.seq;
    draw.current();
  }, [frame, n, W, layout]);

  useEffect(() => () => cancelAnimationFrame(raf.current), []);

  const onMove = (e: React.PointerEvent<HTMLCanvasElement>) => {
    const rect = e.currentTarget.getBoundingClientRect();
    const mx = e.clientX - rect.left;
    const my = e.clientY - rect.top;
    const { G, buckets } = index;
    const gx = Math.floor(((mx - pad) / iw) * G);
    const gy = Math.floor(((my - pad) / ih) * G);
    let best = -1;
    let bd = (dot * 2) ** 2;
    for (let y = gy - 1; y <= gy + 1; y++)
      for (let x = gx - 1; x <= gx + 1; x++) {
        if (x < 0 || y < 0 || x >= G || y >= G) continue;
        for (const i of buckets[y * G + x]) {
          const d = (px(layout.x[i]) - mx) ** 2 + (py(layout.y[i]) - my) ** 2;
          if (d < bd) {
            bd = d;
            best = i;
          }
        }
      }
    if (best < 0) return setHover(null);
    const row = Math.floor(best / frame.cols);
    const byte = frame.map[best] ?? 0;
    setHover({
      x: e.clientX - rect.left,
      y: e.clientY - rect.top,
      layer: frame.layers[row] ?? row,
      expert: best % frame.cols,
      tier: tierOf(byte),
      heat: heatOf(byte),
      count: counts ? counts[best] : null,
      region: layout.region[best],
      left: mx > W - 190,
      up: my > H - 100,
    });
  };

  return (
    <div className="explore-wrap" ref={wrap}>
      <div className="grid-inner" style={{ width: W, height: H }}>
        <canvas
          ref={canvas}
          className="explore-canvas"
          role="img"
          aria-label={`Map of ${n} experts in ${layout.regions.length} regions of co-routing`}
          data-testid="explore-canvas"
          onPointerMove={onMove}
          onPointerDown={onMove}
          onPointerLeave={() => setHover(null)}
        />
        {hover ? <Tooltip h={hover} /> : null}
      </div>
    </div>
  );
}
