import { TIER_NAMES } from "../../api/types";
import { fmtInt } from "../../lib/format";

export interface HoverInfo {
  x: number;
  y: number;
  layer: number;
  expert: number;
  tier: number;
  heat: number;
  count: number | null;
  region?: number;
  /** Open to the left / above (near the right / bottom edge). */
  left?: boolean;
  up?: boolean;
}

export function Tooltip({ h }: { h: HoverInfo }) {
  return (
    <div
      className="tooltip"
      style={{ left: h.x, top: h.y, transform: `translate(${h.left ? "calc(-100% - 12px)" : "12px"}, ${h.up ? "calc(-100% - 12px)" : "12px"})` }}
      role="tooltip"
      data-testid="brain-tooltip"
    >
      <div>
        <strong>Layer {h.layer}</strong> · expert {h.expert}
      </div>
      <div className="tooltip-row">
        <span className={`swatch tier-${h.tier}`} /> {TIER_NAMES[h.tier] ?? "?"} · heat {h.heat}
      </div>
      <div className="tooltip-row">{h.count === null ? "count: loading…" : `routed ${fmtInt(h.count)}×`}</div>
      {h.region !== undefined ? <div className="tooltip-row muted">region {h.region + 1}</div> : null}
    </div>
  );
}
