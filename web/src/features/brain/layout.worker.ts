// Lays out the Explore map off the main thread (100k experts take seconds).
import type { CoGraph } from "../../api/feeds";
import { layoutExperts, type LayoutOptions } from "./layout";

self.onmessage = (e: MessageEvent<{ graph: CoGraph; opts: LayoutOptions }>) => {
  const layout = layoutExperts(e.data.graph, e.data.opts);
  (self as unknown as Worker).postMessage(layout, [layout.x.buffer, layout.y.buffer, layout.region.buffer]);
};
