// Numbers for people.
export function fmtMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}
export function fmtRate(v: number): string {
  return v >= 100 ? v.toFixed(0) : v.toFixed(1);
}
export function fmtSec(s: number): string {
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  return `${s.toFixed(s < 10 ? 2 : 1)} s`;
}
export function fmtPct(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  if (v > 0 && v < 0.001) return "<0.1%";
  if (v < 1 && v > 0.999) return ">99.9%";
  return `${(v * 100).toFixed((v > 0 && v < 0.1) || (v >= 0.995 && v < 1) ? 1 : 0)}%`;
}
export function fmtGB(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  if (v > 0 && v < 0.1) return `${(v * 1000).toFixed(v < 0.01 ? 1 : 0)} MB`;
  return v >= 100 ? `${v.toFixed(0)} GB` : `${v.toFixed(1)} GB`;
}
export function fmtBytes(b: number): string {
  const u = ["B", "kB", "MB", "GB", "TB"];
  let i = 0;
  let v = b;
  while (v >= 1000 && i < u.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v.toFixed(v >= 100 || i === 0 ? 0 : 1)} ${u[i]}`;
}
export function fmtInt(n: number): string {
  return n.toLocaleString("en-US");
}
