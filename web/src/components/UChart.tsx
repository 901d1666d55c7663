// A thin React wrapper around uPlot: created once per options change, data
// updated in place, width following the container.
import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export function UChart({ options, data, height = 200, label }: { options: Omit<uPlot.Options, "width" | "height">; data: uPlot.AlignedData; height?: number; label: string }) {
  const el = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const dataRef = useRef(data);
  dataRef.current = data;
  useEffect(() => {
    const host = el.current;
    if (!host) return;
    const u = new uPlot({ ...options, width: Math.max(100, host.clientWidth), height } as uPlot.Options, dataRef.current, host);
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(100, host.clientWidth), height }));
    ro.observe(host);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [options, height]);
  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);
  return <div ref={el} className="uchart" role="img" aria-label={label} />;
}
