import { useEffect, useRef, useState } from "react";
import type { ExpertsFrame } from "../../api/feeds";
import { decayFlash, flashHits, heatOf, paintCells, tierOf } from "./heat";
import { fitCanvas, useSize } from "./canvas";
import { Tooltip, type HoverInfo } from "./Tooltip";

const MAX_CELL = 22;

/** Cell size for a grid in a box: as wide as fits (≤ 22 px), rows at least 3 px tall when space allows. */
export function cellSize(cols: number, rows: number, w: number, maxH: number): { cw: number; ch: number } {
  const cw = Math.min(MAX_CELL, w / Math.max(1, cols));
  const ch = Math.min(MAX_CELL, Math.max(cw, Math.min(10, maxH / Math.max(1, rows), cw * 1.6)));
  return { cw, ch };
}

export function LiveGrid({ frame, counts }: { frame: ExpertsFrame; counts: Uint32Array | null }) {
  const wrap = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const { w } = useSize(wrap);
  const flash = useRef(new Float32Array(0));
  const lastSeq = useRef<number | null>(null);
  const raf = useRef(0);
  const off = useRef<{ c: HTMLCanvasElement; img: ImageData } | null>(null);
  const [hover, setHover] = useState<HoverInfo | null>(null);
  const [flashed, setFlashed] = useState(0);
  const { rows, cols } = frame;
  const n = rows * cols;
  const maxH = Math.max(240, Math.min(globalThis.innerHeight * 0.62, 720));
  const GUTTER = 34;
  const { cw, ch } = cellSize(cols, rows, Math.max(0, w - GUTTER), maxH);
  const labelEvery = Math.max(1, Math.ceil(14 / Math.max(ch, 0.1)));
  const labelRows = Array.from({ length: Math.ceil(rows / labelEvery) }, (_, k) => k * labelEvery);
  const gw = cw * cols;
  const gh = ch * rows;

  // Draws one frame; schedules the next while flashes are still visible.
  const draw = useRef<() => void>(() => {});
  draw.current = () => {
    const c = canvas.current;
    if (!c || w === 0) return;
    if (!off.current || off.current.c.width !== cols || off.current.c.height !== rows) {
      const oc = document.createElement("canvas");
      oc.width = Math.max(1, cols);
      oc.height = Math.max(1, rows);
      off.current = { c: oc, img: new ImageData(Math.max(1, cols), Math.max(1, rows)) };
    }
    const { c: oc, img } = off.current;
    paintCells(img.data, frame.map, flash.current);
    oc.getContext("2d")?.putImageData(img, 0, 0);
    const ctx = fitCanvas(c, gw, gh);
    if (!ctx) return;
    ctx.imageSmoothingEnabled = cw < 1;
    ctx.clearRect(0, 0, gw, gh);
    ctx.drawImage(oc, 0, 0, gw, gh);
    if (cw >= 6 && ch >= 6) {
      // Gaps between cells, in the panel colour.
      ctx.fillStyle = "rgba(8, 12, 14, 0.9)";
      for (let x = 1; x < cols; x++) ctx.fillRect(Math.round(x * cw) - 0.5, 0, 1.25, gh);
      for (let y = 1; y < rows; y++) ctx.fillRect(0, Math.round(y * ch) - 0.5, gw, 1.25);
    }
    const alive = decayFlash(flash.current);
    cancelAnimationFrame(raf.current);
    if (alive) raf.current = requestAnimationFrame(() => draw.current());
  };

  useEffect(() => {
    if (flash.current.length !== n) {
      flash.current = new Float32Array(n);
      lastSeq.current = null;
    }
    if (lastSeq.current !== null && frame.seq !== lastSeq.current) setFlashed(flashHits(flash.current, frame.hits));
    lastSeq.current = frame.seq;
    draw.current();
  }, [frame, n, w, gw, gh]);

  useEffect(() => () => cancelAnimationFrame(raf.current), []);

  const onMove = (e: React.PointerEvent<HTMLCanvasElement>) => {
    const r = e.currentTarget.getBoundingClientRect();
    const col = Math.floor((e.clientX - r.left) / cw);
    const row = Math.floor((e.clientY - r.top) / ch);
    if (col < 0 || row < 0 || col >= cols || row >= rows) return setHover(null);
    const i = row * cols + col;
    const byte = frame.map[i];
    setHover({
      x: e.clientX - r.left,
      y: e.clientY - r.top,
      layer: frame.layers[row] ?? row,
      expert: col,
      tier: tierOf(byte),
      heat: heatOf(byte),
      count: counts ? counts[i] : null,
      left: e.clientX - r.left > gw - 190,
      up: e.clientY - r.top > gh - 90,
    });
  };

  return (
    <div className="grid-wrap" ref={wrap}>
      <div className="grid-inner grid-with-gutter" style={{ width: gw ? gw + GUTTER : undefined }}>
        <div className="grid-gutter" style={{ width: GUTTER, height: gh }} aria-hidden="true">
          {labelRows.map((r) => (
            <span key={r} style={{ top: r * ch + ch / 2 }}>
              {frame.layers[r] ?? r}
            </span>
          ))}
        </div>
        <canvas
          ref={canvas}
          className="grid-canvas"
          role="img"
          aria-label={`Routing of ${rows} layers × ${cols} experts`}
          data-testid="live-canvas"
          data-flashed={flashed}
          onPointerMove={onMove}
          onPointerDown={onMove}
          onPointerLeave={() => setHover(null)}
        />
        {hover ? <Tooltip h={{ ...hover, x: hover.x + GUTTER }} /> : null}
      </div>
    </div>
  );
}
