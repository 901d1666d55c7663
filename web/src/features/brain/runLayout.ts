// Runs the layout in a Web Worker when the browser has one, else inline.
import type { CoGraph } from "../../api/feeds";
import { layoutExperts, type Layout, type LayoutOptions } from "./layout";

export function runLayout(graph: CoGraph, opts: LayoutOptions): Promise<Layout> {
  if (typeof Worker === "undefined") return Promise.resolve(layoutExperts(graph, opts));
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL("./layout.worker.ts", import.meta.url), { type: "module" });
    w.onmessage = (e: MessageEvent<Layout>) => {
      resolve(e.data);
      w.terminate();
    };
    w.onerror = (e) => {
      w.terminate();
      // A worker that cannot start (a strict CSP, say): lay out here instead.
      try {
        resolve(layoutExperts(graph, opts));
      } catch {
        reject(new Error(e.message));
      }
    };
    w.postMessage({ graph, opts });
  });
}
