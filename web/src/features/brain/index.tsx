import { useCallback, useEffect, useMemo, useState } from "react";
import { Brain as BrainIcon, CloudOff, Layers, RefreshCw } from "lucide-react";
import { getFeed } from "../../api/client";
import { parseCoroute } from "../../api/feeds";
import { TIER_NAMES } from "../../api/types";
import { EmptyState } from "../../components/EmptyState";
import { KeyNeeded, useKeyNeeded } from "../../components/KeyNeeded";
import { TIER_RGB, tierCounts } from "./heat";
import type { Layout } from "./layout";
import { runLayout } from "./runLayout";
import { fmtInt } from "../../lib/format";
import { useConnection } from "../../stores/connection";
import { ExploreMap } from "./ExploreMap";
import { LiveGrid } from "./LiveGrid";
import { useExperts } from "./useExperts";

type Tab = "live" | "explore";

interface Mapped {
  layout: Layout;
  source: string;
}

export default function BrainPage() {
  const [tab, setTab] = useState<Tab>("live");
  const health = useConnection((s) => s.health);
  const status = useConnection((s) => s.status);
  const { frame, counts, tokens, settled, missing, cofire } = useExperts();
  const keyNeeded = useKeyNeeded();
  const dense = health?.moe === null || (frame !== null && (frame.rows === 0 || frame.cols === 0));
  const tiers = useMemo(() => (frame ? tierCounts(frame.map) : null), [frame]);
  const lit = useMemo(() => {
    if (!frame) return 0;
    let c = 0;
    for (const b of frame.hits) for (let x = b; x; x &= x - 1) c++;
    return c;
  }, [frame]);

  let body: React.ReactNode;
  if (keyNeeded && !frame) {
    body = <KeyNeeded what="the experts and their routing" />;
  } else if (health?.backend === "upstream" && !health.routing_visible) {
    body = (
      <EmptyState icon={<BrainIcon size={28} />} title="Routing is not visible through an upstream" testId="brain-upstream">
        <p>
          This server is colibri's gateway in front of another engine (<code>coli serve --upstream</code>): the experts fire there, and
          vLLM, SGLang and llama.cpp's server do not publish which. When the upstream is another <code>coli serve</code>, its routing shows
          here.
        </p>
      </EmptyState>
    );
  } else if (dense) {
    body = (
      <EmptyState icon={<Layers size={28} />} title="This model is dense" testId="brain-dense">
        <p>
          {health?.model ? <strong>{health.model}</strong> : "The served model"} has no routed experts: every token runs through all of its
          weights, so there is nothing to route and no brain to draw. Serve a Mixture-of-Experts model (Qwen3-30B-A3B, OLMoE, Mixtral,
          GLM-4.5-Air) to watch its experts fire.
        </p>
      </EmptyState>
    );
  } else if (!frame) {
    body = !settled ? (
      <div className="page-loading" aria-busy="true" />
    ) : missing ? (
      <EmptyState icon={<BrainIcon size={28} />} title="No routing feed on this server" testId="brain-empty">
        <p>
          The server answered, but does not publish <code>/experts</code>. colibri's <code>coli serve</code> does once expert streaming is
          built; other OpenAI-compatible servers never will.
        </p>
      </EmptyState>
    ) : (
      <EmptyState icon={<CloudOff size={28} />} title={status === "offline" ? "No server" : "Waiting for the server"} testId="brain-empty">
        <p>
          Brain shows which experts fire, live. Start <code>coli serve</code> with a Mixture-of-Experts model and this page fills in.
        </p>
      </EmptyState>
    );
  } else {
    body = (
      <>
        <div className="brain-stats">
          <Stat label="Layers × experts" value={`${frame.rows} × ${frame.cols}`} />
          <Stat label="Routed this step" value={fmtInt(lit)} />
          <Stat label="Tokens routed" value={tokens !== null ? fmtInt(tokens) : "—"} />
          <Stat label="Step" value={fmtInt(frame.seq)} />
        </div>
        <div className="brain-panel">
          {tab === "live" ? <LiveGrid frame={frame} counts={counts} /> : <Explore frame={frame} counts={counts} cofire={cofire} />}
        </div>
        <Legend tiers={tiers} />
      </>
    );
  }

  return (
    <div className="page brain" data-testid="page-brain">
      <header className="page-head">
        <div>
          <h1>Brain</h1>
          <p className="muted">Which experts fire. Colour is where an expert lives, brightness how often it is routed, white the last step.</p>
        </div>
        <div className="segmented" role="tablist" aria-label="View">
          <button type="button" role="tab" aria-selected={tab === "live"} className={tab === "live" ? "on" : ""} onClick={() => setTab("live")} data-testid="brain-tab-live">
            Live routing
          </button>
          <button type="button" role="tab" aria-selected={tab === "explore"} className={tab === "explore" ? "on" : ""} onClick={() => setTab("explore")} data-testid="brain-tab-explore">
            Explore
          </button>
        </div>
      </header>
      {body}
    </div>
  );
}

function Stat({ label, value }: { label: string; value: string }) {
  return (
    <div className="stat">
      <span className="stat-label">{label}</span>
      <span className="stat-value">{value}</span>
    </div>
  );
}

function Legend({ tiers }: { tiers: [number, number, number, number] | null }) {
  return (
    <div className="legend" aria-label="Legend">
      {TIER_RGB.map((rgb, t) =>
        t === 2 && tiers && tiers[2] === 0 ? null : (
          <span key={t} className="legend-item">
            <span className="swatch" style={{ background: `rgb(${rgb.join(",")})` }} />
            {TIER_NAMES[t]}
            {tiers ? <span className="muted"> {fmtInt(tiers[t])}</span> : null}
          </span>
        ),
      )}
      <span className="legend-item">
        <span className="heat-ramp" /> heat
      </span>
      <span className="legend-item">
        <span className="swatch flash" /> routed this step
      </span>
    </div>
  );
}

function Explore({ frame, counts, cofire }: { frame: NonNullable<ReturnType<typeof useExperts>["frame"]>; counts: Uint32Array | null; cofire: ReturnType<typeof useExperts>["cofire"] }) {
  const [mapped, setMapped] = useState<Mapped | null>(null);
  const [state, setState] = useState<"idle" | "working" | "nothing">("idle");
  const { rows, cols } = frame;

  const compute = useCallback(async () => {
    setState("working");
    await new Promise((r) => setTimeout(r, 30)); // let "Laying out…" paint
    let graph = null;
    let source = "";
    try {
      const data = parseCoroute(await getFeed("experts/coroute?k=8"));
      if (data && data.rows === rows && data.cols === cols && data.tokens > 0) {
        graph = data.graph;
        source = `co-routing of ${fmtInt(data.tokens)} tokens, measured by the server`;
      }
    } catch {
      /* offline: fall back */
    }
    if (!graph && cofire && cofire.frames >= 3 && cofire.pairCount > 0) {
      graph = cofire.graph(8);
      source = `co-firing seen by this page over ${fmtInt(cofire.frames)} steps (the server has no /experts/coroute)`;
    }
    if (!graph) {
      setState("nothing");
      return;
    }
    const t0 = performance.now();
    const boxW = document.querySelector(".brain-panel")?.clientWidth ?? 800;
    const boxH = Math.min(globalThis.innerHeight * 0.66, 760);
    const layout = await runLayout(graph, { aspect: Math.max(1, Math.min(2.4, (boxW - 40) / boxH)) });
    setMapped({ layout, source: `${source} · laid out in ${Math.round(performance.now() - t0)} ms` });
    setState("idle");
  }, [rows, cols, cofire]);

  useEffect(() => {
    if (!mapped && state === "idle") void compute();
  }, [mapped, state, compute]);

  if (state === "nothing" && !mapped)
    return (
      <EmptyState icon={<BrainIcon size={28} />} title="Nothing measured yet" testId="explore-empty">
        <p>The map forms from experts that fire together. Send a few messages in Chat, then map again.</p>
        <button type="button" className="btn ghost" onClick={() => void compute()}>
          <RefreshCw size={14} /> Map again
        </button>
      </EmptyState>
    );
  if (!mapped) return <div className="page-loading" aria-busy="true">Laying out…</div>;
  return (
    <div className="explore">
      <div className="explore-head small muted">
        <span>
          {mapped.layout.regions.filter((r) => !r.quiet).length} regions · {mapped.source}
        </span>
        <button type="button" className="btn ghost small" onClick={() => void compute()} disabled={state === "working"}>
          <RefreshCw size={13} /> {state === "working" ? "Mapping…" : "Map again"}
        </button>
      </div>
      <ExploreMap layout={mapped.layout} frame={frame} counts={counts} />
    </div>
  );
}
